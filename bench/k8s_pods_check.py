"""Pods as Kubernetes runs them, without a cluster (issue 25, item 2).

Each Deployment of a rendered kustomization (default: the base and the prod
overlay) runs as one Docker container with what its pod template says:

- the security context: ``runAsUser``/``runAsGroup`` (``--user``),
  ``fsGroup`` (``--group-add``), ``readOnlyRootFilesystem`` (``--read-only``),
  dropped and added capabilities, ``allowPrivilegeEscalation: false``
  (``no-new-privileges``), seccomp (``RuntimeDefault`` is Docker's default);
- command and args; env from ``env`` (values, Secret keys, ConfigMap keys) and
  ``envFrom`` (the rendered ConfigMap; Secrets);
- volumes: emptyDir as tmpfs (``sizeLimit`` as its size, mode 0777 as the
  kubelet makes it), Secret and ConfigMap volumes as read-only files,
  PersistentVolumeClaims as named Docker volumes;
- resource limits (``--memory``, ``--cpus``);
- on one network, each container reachable by its Service's name.

Secrets the manifests expect but do not hold (graphmesh-stores,
graphmesh-mesh, graphmesh-api-keys) are made up here; the stores they name
are the local stand-in images (deploy/local-images). Each container's gRPC
startup probe (grpc.health.v1 on the probe's port, from this host) must
report SERVING within periodSeconds x failureThreshold; then 20 law articles
are ingested through the gateway and one Search, with the made-up API key,
must return results (and one without it is reported: UNAUTHENTICATED under
prod's auth). Deployments on GPU nodes (an ``nvidia.com/gpu`` limit)
are skipped: no GPU here.

    PYTHONPATH=.:gen/python .venv/bin/python bench/k8s_pods_check.py [--overlay base --overlay prod]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, save  # noqa: E402

KUSTOMIZE = Path(os.environ.get("KUSTOMIZE", REPO / ".tools" / "kustomize-v5.7.1"))
PREFIX = "gm-pod"
POSTGRES_IMAGE = "pgvector/pgvector:0.8.0-pg17"
NEO4J_IMAGE = "neo4j:5.26-community"


def render(target: str) -> list[dict]:
    """The objects ``kustomize build deploy/k8s/<target>`` renders ("base" or an overlay name)."""
    path = REPO / "deploy" / "k8s" / ("base" if target == "base" else f"overlays/{target}")
    out = subprocess.run([str(KUSTOMIZE), "build", str(path)], check=True, text=True, stdout=subprocess.PIPE).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def quantity_bytes(q: str) -> int:
    """A Kubernetes memory quantity ("256Mi", "1Gi", "500M", "1024") in bytes."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([KMGTE]i?)?", str(q))
    if not m:
        raise ValueError(f"unsupported quantity {q!r}")
    units = {None: 1, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "E": 10**18,
             "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Ei": 2**60}
    return int(float(m.group(1)) * units[m.group(2)])


def cpus(q: str) -> str:
    """A Kubernetes CPU quantity ("500m", "2") as Docker's --cpus value."""
    q = str(q)
    return str(int(q[:-1]) / 1000) if q.endswith("m") else q


def docker_run_args(deployment: dict, objects: list[dict], secret_data: dict[str, dict[str, str]],
                    image: str, network: str, files: Path) -> list[str]:
    """``docker run`` arguments for the first container of ``deployment``'s pod
    template. ``objects`` (the rendered kustomization) give ConfigMaps and the
    Service names; ``secret_data`` maps a Secret name to its keys and values;
    ``image`` replaces the manifest's image; Secret and ConfigMap volumes are
    written under ``files``. Raises KeyError for a Secret or ConfigMap that is
    neither rendered nor given (unless the reference is optional)."""
    name = deployment["metadata"]["name"]
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    psc, csc = pod.get("securityContext", {}), container.get("securityContext", {})
    configmaps = {o["metadata"]["name"]: o.get("data", {}) for o in objects if o["kind"] == "ConfigMap"}
    # --no-healthcheck: Kubernetes ignores the image's HEALTHCHECK (its probes are the manifest's).
    args = ["--name", f"{PREFIX}-{name}", "--network", network, "--hostname", name, "--no-healthcheck"]
    labels = deployment["spec"]["template"]["metadata"].get("labels", {})
    for svc in (o for o in objects if o["kind"] == "Service"):
        selector = svc["spec"].get("selector", {})
        if selector and all(labels.get(k) == v for k, v in selector.items()):
            args += ["--network-alias", svc["metadata"]["name"]]
    user, group = csc.get("runAsUser", psc.get("runAsUser")), csc.get("runAsGroup", psc.get("runAsGroup"))
    if user is not None:
        args += ["--user", f"{user}:{group}" if group is not None else str(user)]
    if psc.get("fsGroup") is not None:
        args += ["--group-add", str(psc["fsGroup"])]
    if csc.get("readOnlyRootFilesystem"):
        args.append("--read-only")
    for cap in csc.get("capabilities", {}).get("drop", []):
        args += ["--cap-drop", cap]
    for cap in csc.get("capabilities", {}).get("add", []):
        args += ["--cap-add", cap]
    if csc.get("allowPrivilegeEscalation") is False:
        args += ["--security-opt", "no-new-privileges:true"]
    seccomp = csc.get("seccompProfile", psc.get("seccompProfile", {})).get("type")
    if seccomp == "Unconfined":
        args += ["--security-opt", "seccomp=unconfined"]
    elif seccomp not in (None, "RuntimeDefault"):
        raise ValueError(f"{name}: seccomp profile {seccomp} is not supported here")
    if csc.get("privileged"):
        args.append("--privileged")
    limits = container.get("resources", {}).get("limits", {})
    if "memory" in limits:
        args += ["--memory", str(quantity_bytes(limits["memory"]))]
    if "cpu" in limits:
        args += ["--cpus", cpus(limits["cpu"])]

    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        prefix = source.get("prefix", "")
        if "configMapRef" in source:
            ref = source["configMapRef"]
            data = configmaps.get(ref["name"])
        else:
            ref = source["secretRef"]
            data = secret_data.get(ref["name"])
        if data is None:
            if ref.get("optional"):
                continue
            raise KeyError(f"{name}: envFrom {ref['name']} is not there")
        env.update({prefix + k: v for k, v in data.items()})
    for item in container.get("env", []):
        if "value" in item:
            env[item["name"]] = str(item["value"])
            continue
        ref = item["valueFrom"]
        if "secretKeyRef" in ref or "configMapKeyRef" in ref:
            key_ref = ref.get("secretKeyRef") or ref["configMapKeyRef"]
            store = secret_data if "secretKeyRef" in ref else configmaps
            value = store.get(key_ref["name"], {}).get(key_ref["key"])
            if value is None:
                if key_ref.get("optional"):
                    continue
                raise KeyError(f"{name}: {item['name']} needs {key_ref['name']}/{key_ref['key']}")
            env[item["name"]] = value
        elif "fieldRef" in ref:
            path = ref["fieldRef"]["fieldPath"]
            env[item["name"]] = {"metadata.name": f"{PREFIX}-{name}", "metadata.namespace": "default"}.get(path, "")
        else:
            raise ValueError(f"{name}: unsupported env source {ref}")
    for key, value in env.items():
        args += ["--env", f"{key}={value}"]

    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    for mount in container.get("volumeMounts", []):
        vol = volumes[mount["name"]]
        path = mount["mountPath"]
        if "emptyDir" in vol:
            opts = ["rw", "mode=0777"]
            if vol["emptyDir"].get("sizeLimit"):
                opts.append(f"size={quantity_bytes(vol['emptyDir']['sizeLimit'])}")
            args += ["--tmpfs", f"{path}:{','.join(opts)}"]
        elif "secret" in vol or "configMap" in vol:
            is_secret = "secret" in vol
            src = vol["secret"]["secretName"] if is_secret else vol["configMap"]["name"]
            data = (secret_data if is_secret else configmaps).get(src)
            if data is None:
                raise KeyError(f"{name}: volume {mount['name']} needs {src}")
            folder = files / name / mount["name"]
            folder.mkdir(parents=True, exist_ok=True)
            mode = (vol["secret"] if is_secret else vol["configMap"]).get("defaultMode", 0o644)
            for key, value in data.items():
                (folder / key).write_text(value)
                # The kubelet gives the files to root, group fsGroup; here the
                # files are the run user's own with the manifest's mode.
                if user is not None:
                    os.chown(folder / key, int(user), int(psc.get("fsGroup", group or 0)))
                (folder / key).chmod(mode)
            args += ["--volume", f"{folder}:{path}:ro"]
        elif "persistentVolumeClaim" in vol:
            args += ["--volume", f"{PREFIX}-{vol['persistentVolumeClaim']['claimName']}:{path}"
                     + (":ro" if mount.get("readOnly") else "")]
        else:
            raise ValueError(f"{name}: unsupported volume {vol}")
    args.append(image)
    args += container.get("command", []) + container.get("args", [])
    return args


def startup_probe(deployment: dict) -> tuple[int, float]:
    """(gRPC port, seconds allowed) of the first container's startup probe
    (periodSeconds x failureThreshold, Kubernetes' defaults 10 and 3)."""
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    probe = container["startupProbe"]
    return probe["grpc"]["port"], probe.get("periodSeconds", 10) * probe.get("failureThreshold", 3) + probe.get("initialDelaySeconds", 0)


def health(address: str) -> str:
    """grpc.health.v1 status name of ``address`` ("" service), or the error code."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    with grpc.insecure_channel(address) as ch:
        try:
            reply = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=3)
            return health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
        except grpc.RpcError as err:
            return err.code().name


def ip_of(container: str, network: str) -> str:
    data = json.loads(subprocess.run(["docker", "inspect", container], check=True, text=True, stdout=subprocess.PIPE).stdout)[0]
    return data["NetworkSettings"]["Networks"][network]["IPAddress"]


def docker(*args: str, check: bool = True) -> str:
    return subprocess.run(["docker", *args], check=check, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE).stdout


def run_target(target: str, image: str) -> dict:
    """Runs every Deployment of ``target`` as containers; returns per
    Deployment the seconds to SERVING (or the last status) and one Search."""
    objects = render(target)
    deployments = [o for o in objects if o["kind"] == "Deployment"]
    network = f"{PREFIX}-{target}"
    pg_pw, neo_pw = secrets.token_hex(12), secrets.token_hex(12)
    stored_key_line, api_key = api_key_pair()
    secret_data = {
        "graphmesh-stores": {"pg-dsn": f"postgresql://graphmesh:{pg_pw}@postgres:5432/graphmesh",
                             "neo4j-uri": "bolt://neo4j:7687", "neo4j-user": "neo4j", "neo4j-password": neo_pw},
        "graphmesh-mesh": {"token": secrets.token_hex(32)},
        "graphmesh-api-keys": {"keys": stored_key_line + "\n"},
    }
    result: dict = {"target": target, "deployments": {}, "skipped": []}
    started: list[str] = []
    files = Path(tempfile.mkdtemp(prefix="graphmesh-pods-"))
    try:
        docker("network", "create", network)
        for store, img, env in (("postgres", POSTGRES_IMAGE, ["POSTGRES_USER=graphmesh", "POSTGRES_DB=graphmesh", f"POSTGRES_PASSWORD={pg_pw}"]),
                                ("neo4j", NEO4J_IMAGE, [f"NEO4J_AUTH=neo4j/{neo_pw}"])):
            docker("run", "-d", "--name", f"{PREFIX}-{store}", "--network", network, "--network-alias", store,
                   *[a for e in env for a in ("--env", e)], img)
            started.append(f"{PREFIX}-{store}")
        wait_stores(pg_pw, neo_pw)
        t0 = time.monotonic()
        for d in deployments:
            limits = d["spec"]["template"]["spec"]["containers"][0].get("resources", {}).get("limits", {})
            if "nvidia.com/gpu" in limits:
                result["skipped"].append(f"{d['metadata']['name']} (nvidia.com/gpu: no GPU here)")
                continue
            args = docker_run_args(d, objects, secret_data, image, network, files)
            docker("run", "-d", *args)
            started.append(f"{PREFIX}-{d['metadata']['name']}")
        for d in deployments:
            name = d["metadata"]["name"]
            if f"{PREFIX}-{name}" not in started:
                continue
            port, allowed = startup_probe(d)
            address = f"{ip_of(f'{PREFIX}-{name}', network)}:{port}"
            status, deadline = "", t0 + allowed
            while time.monotonic() < deadline:
                status = health(address)
                if status == "SERVING":
                    break
                time.sleep(1)
            entry = {"status": status, "serving_after_s": round(time.monotonic() - t0, 1) if status == "SERVING" else None,
                     "probe_allows_s": allowed}
            if status != "SERVING":
                entry["log_tail"] = docker("logs", "--tail", "15", f"{PREFIX}-{name}", check=False)
                entry["log_tail"] += subprocess.run(["docker", "logs", "--tail", "15", f"{PREFIX}-{name}"], text=True,
                                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE).stderr
            result["deployments"][name] = entry
        result["search"] = search_once(f"{ip_of(f'{PREFIX}-gateway', network)}:50051", api_key)
    finally:
        for c in started:
            docker("rm", "-f", "-v", c, check=False)
        docker("network", "rm", network, check=False)
        for v in docker("volume", "ls", "-q", "--filter", f"name={PREFIX}-", check=False).split():
            docker("volume", "rm", v, check=False)
        subprocess.run(["rm", "-rf", str(files)], check=False)
    return result


def api_key_pair() -> tuple[str, str]:
    """(stored line, key) made by `graphmesh keys create`'s own code."""
    from services.cli.keys import create_key

    key, line = create_key("pods-check")
    return line, key


def wait_stores(pg_pw: str, neo_pw: str, limit: float = 180) -> None:
    """Until both store containers answer their health commands."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        pg = subprocess.run(["docker", "exec", f"{PREFIX}-postgres", "pg_isready", "-h", "127.0.0.1", "-U", "graphmesh"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0
        neo = subprocess.run(["docker", "exec", f"{PREFIX}-neo4j", "cypher-shell", "-u", "neo4j", "-p", neo_pw, "RETURN 1"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0
        if pg and neo:
            return
        time.sleep(2)
    raise RuntimeError("the store containers did not become ready")


def search_once(address: str, api_key: str, docs: int = 20) -> dict:
    """Ingests the first ``docs`` law articles through the gateway, then one
    Search with the API key and one without (UNAUTHENTICATED where the
    manifests turn auth on, as prod does)."""
    import itertools

    import grpc

    from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc
    from harness import LAW_CORPUS, read_lines

    key = [("x-api-key", api_key)]
    with grpc.insecure_channel(address) as ch:
        stub = gateway_pb2_grpc.GatewayServiceStub(ch)
        out: dict = {}
        try:
            payload = "\n".join(itertools.islice(read_lines(LAW_CORPUS), docs)).encode()
            out["stored"] = stub.Ingest(gateway_pb2.IngestRequest(jsonl=payload, domain_pack="law_zh"), timeout=300, metadata=key).stored
            r = stub.Search(gateway_pb2.SearchRequest(query="宪法修改由谁提议？", top_k=3), timeout=60, metadata=key)
            out.update(code="OK", results=len(r.results), degraded=list(r.degraded))
        except grpc.RpcError as err:
            out.update(code=err.code().name, detail=err.details())
        try:
            stub.Search(gateway_pb2.SearchRequest(query="宪法", top_k=3), timeout=60)
            out["without_key"] = "OK"
        except grpc.RpcError as err:
            out["without_key"] = err.code().name
        return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--overlay", action="append", help="base or an overlay name (default: base and prod)")
    parser.add_argument("--image", default="graphmesh:local", help="image for every GraphMesh container")
    args = parser.parse_args()
    results = [run_target(t, args.image) for t in (args.overlay or ["base", "prod"])]
    ok = True
    print()
    print("| kustomization | deployment | status | SERVING after | probe allows |")
    print("|---|---|---|---|---|")
    for r in results:
        for name, e in r["deployments"].items():
            print(f"| {r['target']} | {name} | {e['status']} | {e['serving_after_s']} s | {e['probe_allows_s']} s |")
            ok &= e["status"] == "SERVING"
        print(f"| {r['target']} | Search via gateway | {r['search']} | | |")
        ok &= r["search"].get("code") == "OK" and r["search"].get("results", 0) > 0
        for s in r["skipped"]:
            print(f"| {r['target']} | {s} | skipped | | |")
    for r in results:
        for name, e in r["deployments"].items():
            if e.get("log_tail"):
                print(f"--- {r['target']}/{name}:\n{e['log_tail']}")
    save("k8s_pods_check", {"results": results})
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
