"""The journal store against a real twin over HTTP: a journal of 1,000 consumers and 3,000
changes, more than 1 MiB as one document (which kube-apiserver refuses), stored in bounded
chunks, read back whole, resumed by appending; another writer stops the run; a new run clears
the chunks of the one before."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpushift import kube
from gpushift._kinds import by_kind
from gpushift.kube import Kube, KubeError, ResourceRef
from gpushift.runbook import (
    CHUNK_BYTES,
    JOURNAL_NAME,
    Change,
    Journal,
    JournalStore,
    ObjectRef,
    StoppedError,
    chunk_name,
    cluster_key,
    local_journal,
    normalise_server,
    parse_lines,
    read_local,
)
from gpushift_twin import Twin, run_twin

CONFIGMAP = ResourceRef.named("ConfigMap", "v1")
NS = "flux-system"
MIB = 1024 * 1024


@pytest.fixture(scope="module")
def twin() -> Iterator[Twin]:
    with run_twin() as running:
        running.store.create(by_kind("Namespace"), {"metadata": {"name": NS}})
        yield running


@pytest.fixture
def client(twin: Twin) -> Iterator[Kube]:
    with kube.connect(kubeconfig=twin.kubeconfig) as c:
        yield c
        for cm in c.list(CONFIGMAP, namespace=NS):
            c.delete(CONFIGMAP, name=cm["metadata"]["name"], namespace=NS)


def _change(i: int) -> Change:
    obj = ObjectRef("apps/v1", "Deployment", f"team-{i % 10}", f"app-{i:04d}")
    return Change("suspend", obj, ("spec", "replicas"), 1, 0, "scale to 0")


def _journal(run: str, consumers: int) -> Journal:
    return Journal.begin(
        run=run,
        to="dra",
        started="2026-12-01T10:00:00.000Z",
        options={"to": "dra", "source": {"namespace": NS}},
        facts={"oldShares": 5},
        consumers=[
            {"workload": {"kind": "Deployment", "name": f"app-{i:04d}"}, "flux": [], "pods": []}
            for i in range(consumers)
        ],
    )


def _sizes(c: Kube) -> dict[str, int]:
    return {
        cm["metadata"]["name"]: sum(len(v.encode()) for v in (cm.get("data") or {}).values())
        for cm in c.list(CONFIGMAP, namespace=NS)
    }


def test_a_journal_over_1_mib_is_stored_in_bounded_chunks_and_resumed(
    client: Kube, tmp_path: Path
) -> None:
    path = tmp_path / "journal.json"
    store = JournalStore(client, namespace=NS, path=path)
    assert store.read() is None
    journal = _journal("r1", 1000)
    journal.start_step("suspend", "2026-12-01T10:00:01.000Z")
    store.write(journal)
    for i in range(3000):
        journal.plan_change(_change(i), "2026-12-01T10:00:02.000Z")
        journal.applied(_change(i), "2026-12-01T10:00:03.000Z")
        if i % 100 == 99 or i >= 2990:  # the last ten one write each, as a run makes them
            store.write(journal)
    # As one document (the format before records) it would not fit in a ConfigMap.
    whole = json.dumps(journal.to_json(), indent=1, sort_keys=True)
    assert len(whole) > MIB
    with pytest.raises(KubeError) as err:
        client.create(
            CONFIGMAP,
            {"metadata": {"name": "whole"}, "data": {"journal.json": whole}},
            namespace=NS,
        )
    assert err.value.code == 422 and "Too long" in err.value.message
    sizes = _sizes(client)
    chunks = sorted((k for k in sizes if k != JOURNAL_NAME), key=lambda k: int(k.rsplit("-")[-1]))
    assert chunks == [chunk_name(i) for i in range(1, len(chunks) + 1)]
    assert len(chunks) >= 10
    assert max(sizes[k] for k in chunks) <= CHUNK_BYTES + 64  # + the run key
    assert sizes[JOURNAL_NAME] < 4_000

    # A new process reads the same journal back, from the cluster and from the file.
    again = JournalStore(client, namespace=NS, path=path)
    read = again.read()
    assert read is not None and read.to_json() == journal.to_json()
    lines = parse_lines(path.read_text())
    assert [r["seq"] for r in lines] == list(range(1, journal.seq + 1))
    # It resumes by appending: one request for the record, the head untouched.
    head_rv = client.get(CONFIGMAP, name=JOURNAL_NAME, namespace=NS)["metadata"]["resourceVersion"]
    read.finish_step("suspend", "done", 3.0, "2026-12-01T10:00:04.000Z")
    read.set_data("token", "t-1")
    again.write(read)
    assert len(parse_lines(path.read_text())) == read.seq
    third = JournalStore(client, namespace=NS, path=tmp_path / "elsewhere.json").read()
    assert third is not None and third.to_json() == read.to_json()
    head = client.get(CONFIGMAP, name=JOURNAL_NAME, namespace=NS)
    assert head["metadata"]["resourceVersion"] != head_rv  # the step finished: steps.json
    assert json.loads(head["data"]["steps.json"])[0]["result"] == "done"

    # The first process, writing again after the second did, is stopped.
    journal.set_state("aborted")
    with pytest.raises(StoppedError, match="another process wrote the journal of run r1"):
        store.write(journal)

    # A new run archives the finished one, replaces the head and deletes its chunks.
    read.set_state("done")
    again.write(read)
    fresh = JournalStore(client, namespace=NS, path=path)
    last = fresh.read()
    assert last is not None and last.finished
    fresh.archive(last)
    nxt = _journal("r2", 2)
    fresh.write(nxt)
    assert sorted(_sizes(client)) == [JOURNAL_NAME, chunk_name(1)]
    head = client.get(CONFIGMAP, name=JOURNAL_NAME, namespace=NS)
    assert [h["run"] for h in json.loads(head["data"]["history.json"])] == ["r1"]
    got = JournalStore(client, namespace=NS, path=path).read()
    assert got is not None and got.to_json() == nxt.to_json()


def test_a_torn_local_file_is_rewritten_and_a_lost_head_answer_is_not_a_takeover(
    client: Kube, tmp_path: Path
) -> None:
    path = tmp_path / "journal.json"
    store = JournalStore(client, namespace=NS, path=path)
    journal = _journal("r3", 3)
    journal.start_step("snapshot", "t")
    store.write(journal)
    # A crash mid-append leaves a torn last line.
    path.write_text(path.read_text() + '{"seq": 4, "op": "ste')
    resumed_store = JournalStore(client, namespace=NS, path=path)
    resumed = resumed_store.read()
    assert resumed is not None and resumed.seq == journal.seq
    resumed.finish_step("snapshot", "done", 1.0, "t2")
    resumed_store.write(resumed)
    assert [r["seq"] for r in parse_lines(path.read_text())] == list(range(1, resumed.seq + 1))
    # The store's own write, answered after the object moved on (a retried request): the
    # head already holds what it writes, so it is not taken for another writer.
    resumed.finish_step("snapshot", "done", 1.0, "t2")
    resumed_store.head = {}
    resumed_store.version = "1"
    resumed_store.write(resumed)


def test_a_server_url_is_normalised_before_it_keys_a_journal() -> None:
    assert normalise_server("HTTPS://Cluster.Example:443/") == "https://cluster.example"
    assert normalise_server("https://user:pw@10.0.0.1:6443") == "https://10.0.0.1:6443"
    assert normalise_server("http://[::1]:80/k8s/") == "http://[::1]/k8s"
    # sha256("https://10.0.0.1:6443|abc")[:16], computed apart.
    assert cluster_key("https://10.0.0.1:6443/", "abc") == "4ee349b2d4ca2750"


def test_a_journal_at_the_old_place_moves_only_to_the_cluster_holding_its_run(
    client: Kube, tmp_path: Path
) -> None:
    home = tmp_path / ".gpushift"
    legacy = home / "cutover-journal.json"
    journal = _journal("r-old", 0)
    legacy.parent.mkdir()
    legacy.write_text("".join(json.dumps(r) + "\n" for r in journal.log))
    (home / "cutover-before.gpusnapshot.json").write_text("{}")
    # This cluster's ConfigMap holds another run: the file is not this cluster's.
    JournalStore(client, namespace=NS, path=tmp_path / "elsewhere.json").write(_journal("r2", 0))
    found = local_journal(client, namespace=NS, home=home)
    uid = client.get(ResourceRef.named("Namespace", "v1"), name="kube-system")["metadata"]["uid"]
    assert uid and found.cluster == {
        "server": normalise_server(client.server),
        "kubeSystemUid": uid,
    }
    assert (
        found.path == home / "journals" / cluster_key(client.server, uid) / "cutover-journal.json"
    )
    assert legacy.exists() and not found.path.exists()
    assert found.notes == (
        f"{legacy} holds an unfinished journal (run r-old) that this cluster's ConfigMap "
        "flux-system/gpushift-cutover-journal does not: kept there for the cluster that does; "
        "it neither blocks nor resumes here",
    )

    # Once it does, the file and the snapshot beside it move under the cluster's key.
    client.delete(CONFIGMAP, name=JOURNAL_NAME, namespace=NS)
    JournalStore(client, namespace=NS, path=tmp_path / "elsewhere.json").write(journal)
    found = local_journal(client, namespace=NS, home=home)
    assert found.notes == (f"moved the journal of run r-old from {legacy} to {found.path}",)
    assert not legacy.exists()
    moved = read_local(found.path.read_text())
    assert moved is not None and moved.run == "r-old" and moved.seq == journal.seq
    assert (found.path.parent / "cutover-before.gpusnapshot.json").read_text() == "{}"
    assert json.loads((found.path.parent / "cluster.json").read_text()) == found.cluster
    # A second copy at the old place does not replace it: named, left alone.
    legacy.write_text(found.path.read_text())
    again = local_journal(client, namespace=NS, home=home)
    assert again.notes == (
        f"{legacy} holds run r-old of this cluster, but {found.path} exists: not moved, and "
        "not read (remove one of them)",
    )
    assert legacy.exists()
    legacy.unlink()

    # Seen from another cluster (another key), it is named, not read as this one's.
    other = tmp_path / "other"
    (other / "journals" / "0123456789abcdef").mkdir(parents=True)
    (other / "journals" / "0123456789abcdef" / "cutover-journal.json").write_text(
        found.path.read_text()
    )
    (other / "journals" / "0123456789abcdef" / "cluster.json").write_text(
        '{"server": "https://prod.example:6443"}'
    )
    seen = local_journal(client, namespace=NS, home=other)
    assert seen.notes == (
        "an unfinished journal of another cluster (https://prod.example:6443, run r-old) is "
        f"kept in {other / 'journals' / '0123456789abcdef'}; it neither blocks nor resumes here",
    )
