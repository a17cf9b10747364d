"""timewarp/_core/podidentity.py: the service-account files at their literal path and the
API's in-cluster names, in a process of their own (the patches are process-wide)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from simrun import ROOT

PROGRAM = """
import os, pathlib, socket, ssl, sys
from timewarp._core import podidentity

folder = sys.argv[1]
podidentity.install(folder, ("127.0.0.1", 4321))
SA = "/var/run/secrets/kubernetes.io/serviceaccount"
print(open(SA + "/token").read())
print(pathlib.Path(SA, "namespace").read_text())
print(os.path.isdir(SA), os.path.exists(SA + "/ca.crt"), os.path.exists(SA + "/nope"))
print(sorted(os.listdir(SA)), sorted(p.name for p in pathlib.Path(SA).iterdir()))
print(os.read(os.open(SA.encode() + b"/token", os.O_RDONLY), 100).decode())
for attempt in (lambda: open(SA + "/token", "w"), lambda: os.open(SA + "/x", os.O_CREAT | os.O_WRONLY)):
    try:
        attempt()
        print("written")
    except OSError as exc:
        print("refused", exc.errno)
ctx = ssl.create_default_context(cafile=SA + "/ca.crt")  # a CA from the redirected file
print(len(ctx.get_ca_certs()))
for host in ("kubernetes.default.svc", "kubernetes.default.svc.cluster.local.", "KUBERNETES"):
    print(host, socket.getaddrinfo(host, 443, type=socket.SOCK_STREAM)[0][4])
print(socket.gethostbyname("kubernetes.default"))
print(socket.getaddrinfo("127.0.0.1", 80, type=socket.SOCK_STREAM)[0][4])
print(open(os.path.join(folder, "token")).read())  # elsewhere: untouched
"""


def test_a_pod_s_files_and_names_are_where_programs_look(tmp_path):
    from broker.facade.tls import generate  # the run's CA, as the facade makes it

    folder = tmp_path / "sa"
    folder.mkdir()
    (folder / "token").write_text("the-token")
    (folder / "namespace").write_text("team-a")
    (folder / "ca.crt").write_bytes(generate(tmp_path / "tls").ca_cert.read_bytes())
    r = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(PROGRAM), str(folder)],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "the-token",
        "team-a",
        "True True False",
        "['ca.crt', 'namespace', 'token'] ['ca.crt', 'namespace', 'token']",
        "the-token",
        "refused 30",
        "refused 30",
        "1",
        "kubernetes.default.svc ('127.0.0.1', 4321)",
        "kubernetes.default.svc.cluster.local. ('127.0.0.1', 4321)",
        "KUBERNETES ('127.0.0.1', 4321)",
        "127.0.0.1",
        "('127.0.0.1', 80)",
        "the-token",
    ]
