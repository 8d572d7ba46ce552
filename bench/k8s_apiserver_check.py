"""Manifests accepted by a real API server (issue 25, item 3).

Starts etcd and kube-apiserver on loopback (binaries built once from the Go
module proxy by ``make k8s-tools`` into .tools/k8s-<version>/, with the
kubectl of the same version), applies the Prometheus Operator CRDs the
monitoring component needs (ServiceMonitor, PrometheusRule, from the Go
module github.com/prometheus-operator/prometheus-operator at the version the
vendored schemas of tests/deploy/schemas name), then runs

    kubectl apply --server-side --dry-run=server --validate=strict

on every render of tests/deploy/manifests.render_all: both overlays and the
base with every combination of the components. The namespaces the overlays
declare are created for real first (a dry run cannot create the namespace
its other objects go in), each with ``pod-security.kubernetes.io/warn:
restricted`` added, as is ``default`` (where the base renders go), so that
Pod Security admission reports any pod template that breaks the restricted
profile. Any error, any warning, or an object kubectl does not report
applied, in any render, fails the check. Three broken objects (an unknown
probe field in a Deployment, a ServiceMonitor field of the wrong type, a
container allowing privilege escalation) must be refused or warned about, or
the check fails: they show that the server validates what it is sent.

    PYTHONPATH=.:gen/python .venv/bin/python bench/k8s_apiserver_check.py

Figures (seconds to a ready server, per-render dry-run seconds, objects
accepted) are printed and saved to bench/results/k8s-apiserver-check-*.json.
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, save  # noqa: E402

sys.path.insert(0, str(REPO))
from tests.deploy.manifests import render_all  # noqa: E402

K8S_VERSION = "v1.37.2"  # deploy/k8s-tools/go.mod; the Makefile's K8S_TOOLS_VERSION
OPERATOR_MODULE = "github.com/prometheus-operator/prometheus-operator"
OPERATOR_VERSION = "v0.93.0"  # tests/deploy/schemas/README.md
CRDS = ("monitoring.coreos.com_servicemonitors.yaml", "monitoring.coreos.com_prometheusrules.yaml")
WARN_LABEL = "pod-security.kubernetes.io/warn=restricted"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def operator_crds() -> list[Path]:
    """The two CRD files, from the operator's module as the Go proxy serves it
    (``go mod download``; the module cache keeps it after the first time)."""
    out = subprocess.run(["go", "mod", "download", "-json", f"{OPERATOR_MODULE}@{OPERATOR_VERSION}"],
                         check=True, capture_output=True, text=True, env={**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=mod"})
    root = Path(json.loads(out.stdout)["Dir"]) / "example" / "prometheus-operator-crd"
    return [root / name for name in CRDS]


def make_credentials(d: Path) -> dict[str, Path]:
    """A self-signed serving certificate for 127.0.0.1, the service-account
    signing key pair and a static token file (one token, group system:masters)."""
    files = {"cert": d / "apiserver.crt", "key": d / "apiserver.key", "sa": d / "sa.key", "sa_pub": d / "sa.pub", "tokens": d / "tokens.csv"}
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=kube-apiserver",
                    "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
                    "-keyout", str(files["key"]), "-out", str(files["cert"])], check=True, capture_output=True)
    subprocess.run(["openssl", "genrsa", "-out", str(files["sa"]), "2048"], check=True, capture_output=True)
    subprocess.run(["openssl", "rsa", "-in", str(files["sa"]), "-pubout", "-out", str(files["sa_pub"])], check=True, capture_output=True)
    token = os.urandom(16).hex()
    files["tokens"].write_text(f"{token},graphmesh-check,graphmesh-check,system:masters\n")
    files["token"] = token  # type: ignore[assignment]
    return files


class Cluster:
    """etcd + kube-apiserver on loopback under ``d``, and a kubectl for them."""

    def __init__(self, tools: Path, d: Path):
        self.tools, self.d = tools, d
        self.procs: list[subprocess.Popen] = []
        self.kubeconfig = d / "kubeconfig"

    def start(self, timeout_s: float = 120.0) -> float:
        """Starts both; returns seconds until /readyz answered ok.
        Raises RuntimeError (with the last log lines) when it does not."""
        t0 = time.monotonic()
        creds = make_credentials(self.d)
        client, peer, secure = free_port(), free_port(), free_port()
        etcd_log = open(self.d / "etcd.log", "w")
        self.procs.append(subprocess.Popen([
            str(self.tools / "etcd"), "--name", "check", "--data-dir", str(self.d / "etcd"),
            "--listen-client-urls", f"http://127.0.0.1:{client}", "--advertise-client-urls", f"http://127.0.0.1:{client}",
            "--listen-peer-urls", f"http://127.0.0.1:{peer}", "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-cluster", f"check=http://127.0.0.1:{peer}", "--log-level", "warn"],
            stdout=etcd_log, stderr=subprocess.STDOUT))
        api_log = open(self.d / "kube-apiserver.log", "w")
        self.procs.append(subprocess.Popen([
            str(self.tools / "kube-apiserver"), "--etcd-servers", f"http://127.0.0.1:{client}",
            "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1", "--secure-port", str(secure),
            "--tls-cert-file", str(creds["cert"]), "--tls-private-key-file", str(creds["key"]),
            "--token-auth-file", str(creds["tokens"]), "--authorization-mode", "RBAC",
            "--service-account-issuer", "https://127.0.0.1", "--service-account-key-file", str(creds["sa_pub"]),
            "--service-account-signing-key-file", str(creds["sa"]), "--service-cluster-ip-range", "10.96.0.0/16",
            "--endpoint-reconciler-type", "none", "--cert-dir", str(self.d / "certs"), "--v", "1"],
            stdout=api_log, stderr=subprocess.STDOUT))
        self.kubeconfig.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "check",
            "clusters": [{"name": "check", "cluster": {"server": f"https://127.0.0.1:{secure}", "certificate-authority": str(creds["cert"])}}],
            "users": [{"name": "check", "user": {"token": creds["token"]}}],
            "contexts": [{"name": "check", "context": {"cluster": "check", "user": "check"}}]}))
        while time.monotonic() - t0 < timeout_s:
            for p, log in zip(self.procs, ("etcd.log", "kube-apiserver.log")):
                if p.poll() is not None:
                    raise RuntimeError(f"{log} exited {p.returncode}:\n" + "".join((self.d / log).read_text().splitlines(True)[-30:]))
            out = self.kubectl("get", "--raw", "/readyz", check=False)
            if out.returncode == 0 and out.stdout.strip() == "ok":
                return time.monotonic() - t0
            time.sleep(1)
        raise RuntimeError("kube-apiserver not ready:\n" + "".join((self.d / "kube-apiserver.log").read_text().splitlines(True)[-30:]))

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
        """Runs kubectl against this server; ``check`` raises on a non-zero exit."""
        out = subprocess.run([str(self.tools / "kubectl"), "--kubeconfig", str(self.kubeconfig), *args],
                             input=stdin, capture_output=True, text=True, timeout=120)
        if check and out.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)} failed ({out.returncode}):\n{out.stderr}")
        return out

    def stop(self) -> None:
        """Stops the apiserver, then etcd (SIGTERM, then SIGKILL after 10 s)."""
        for p in reversed(self.procs):
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def dry_run(cluster: Cluster, objs: list[dict]) -> subprocess.CompletedProcess:
    """``kubectl apply --server-side --dry-run=server --validate=strict`` of ``objs``."""
    return cluster.kubectl("apply", "--server-side", "--dry-run=server", "--validate=strict", "--field-manager", "graphmesh-check",
                           "-f", "-", stdin=yaml.safe_dump_all(objs), check=False)


def problems(out: subprocess.CompletedProcess, objects: int) -> list[str]:
    """The errors and warnings kubectl reported (stderr lines), plus a line
    when fewer than ``objects`` were reported applied; [] when clean."""
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    if out.returncode != 0:
        return lines
    found = [line for line in lines if line.startswith("Warning")]
    applied = sum(line.endswith("(server dry run)") for line in out.stdout.splitlines())
    if applied != objects:
        found.append(f"{applied} of {objects} objects reported applied")
    return found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tools", type=Path, default=Path(os.environ.get("K8S_TOOLS", REPO / ".tools" / f"k8s-{K8S_VERSION}")))
    args = ap.parse_args()
    missing = [b for b in ("etcd", "kube-apiserver", "kubectl") if not (args.tools / b).is_file()]
    if missing:
        print(f"missing {missing} under {args.tools}: run `make k8s-tools`", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="k8s-apiserver-check-") as tmp:
        d = Path(tmp)
        t0 = time.monotonic()
        rendered = render_all(d / "renders")
        render_s = time.monotonic() - t0
        cluster = Cluster(args.tools, d)
        try:
            ready_s = cluster.start()
            versions = json.loads(cluster.kubectl("version", "-o", "json").stdout)
            t0 = time.monotonic()
            crds = operator_crds()
            cluster.kubectl("apply", "--server-side", *[a for c in crds for a in ("-f", str(c))])
            cluster.kubectl("wait", "--for", "condition=Established", "--timeout", "60s",
                            "crd/servicemonitors.monitoring.coreos.com", "crd/prometheusrules.monitoring.coreos.com")
            crds_s = time.monotonic() - t0
            namespaces = {o["metadata"]["name"]: o for objs in rendered.values() for o in objs if o["kind"] == "Namespace"}
            if namespaces:
                cluster.kubectl("apply", "--server-side", "--field-manager", "graphmesh-check-setup", "-f", "-",
                                stdin=yaml.safe_dump_all(list(namespaces.values())))
            for ns in ("default", *namespaces):
                cluster.kubectl("label", "--overwrite", "namespace", ns, WARN_LABEL)

            results, failures = {}, {}
            for label, objs in rendered.items():
                t = time.monotonic()
                out = dry_run(cluster, objs)
                results[label] = {"objects": len(objs), "seconds": round(time.monotonic() - t, 2)}
                if problems(out, len(objs)):
                    failures[label] = problems(out, len(objs))
                print(f"{label}: {len(objs)} objects, {'FAILED' if label in failures else 'accepted'} in {results[label]['seconds']} s", flush=True)

            # The server must refuse what is wrong, or the check above proves nothing.
            prod = rendered["overlay/prod"]
            deployment = copy.deepcopy(next(o for o in prod if o["kind"] == "Deployment" and o["metadata"]["name"] == "gateway"))
            deployment["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["grpc"]["portt"] = 1
            monitor = copy.deepcopy(next(o for o in prod if o["kind"] == "ServiceMonitor"))
            monitor["spec"]["endpoints"][0]["honorLabels"] = "yes"
            privileged = copy.deepcopy(next(o for o in prod if o["kind"] == "Deployment" and o["metadata"]["name"] == "gateway"))
            privileged["spec"]["template"]["spec"]["containers"][0]["securityContext"]["allowPrivilegeEscalation"] = True
            refused = {}
            for what, obj, field in (("Deployment with an unknown probe field", deployment, "portt"),
                                     ("ServiceMonitor with honorLabels: \"yes\"", monitor, "honorLabels"),
                                     ("Deployment allowing privilege escalation (Pod Security warning)", privileged, "allowPrivilegeEscalation")):
                out = dry_run(cluster, [obj])
                refused[what] = any(field in line for line in problems(out, 1))
                print(f"control, {what}: {'refused' if refused[what] else 'NOT refused'}: {out.stderr.strip()[:300]}", flush=True)
        finally:
            cluster.stop()
    for label, lines in failures.items():
        print(f"\n{label}:\n  " + "\n  ".join(lines), file=sys.stderr)
    save("k8s-apiserver-check", {
        "server": versions["serverVersion"]["gitVersion"], "kubectl": versions["clientVersion"]["gitVersion"],
        "operator_crds": f"{OPERATOR_MODULE}@{OPERATOR_VERSION}",
        "renders": len(rendered), "renders_accepted": len(rendered) - len(failures),
        "objects_accepted": sum(r["objects"] for label, r in results.items() if label not in failures),
        "render_s": round(render_s, 2), "apiserver_ready_s": round(ready_s, 2), "crds_established_s": round(crds_s, 2),
        "dry_run_s_total": round(sum(r["seconds"] for r in results.values()), 2),
        "controls_refused": refused, "failures": failures, "per_render": results})
    return 0 if not failures and all(refused.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
