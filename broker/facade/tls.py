"""A throw-away certificate authority and server certificate for the in-cluster (HTTPS)
style of configuration. Keys are ECDSA P-256; certificates are valid for a year from
the wall clock (TLS libraries check real time, not virtual time)."""

from __future__ import annotations

import _ssl
import ctypes
import datetime
import ipaddress
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass(frozen=True)
class TlsFiles:
    ca_cert: Path
    server_cert: Path
    server_key: Path
    ca_key: Path  # to issue client certificates (clientcert.py); private to the run

    def server_context(self) -> ssl.SSLContext:
        """The server's context. It asks for a client certificate and takes any (or none):
        whether one proves a user is decided per request (``clientcert.py``), so that a
        certificate from another CA gets 401 as from kube-apiserver, not a TLS alert."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(self.server_cert, self.server_key)
        ctx.load_verify_locations(self.ca_cert)  # names the acceptable CA to clients
        ctx.verify_mode = ssl.CERT_OPTIONAL
        _accept_any_client_certificate(ctx)
        return ctx


# OpenSSL's verify callback, (preverify_ok, X509_STORE_CTX*) -> int; kept alive here
_VERIFY_CB_TYPE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_void_p)
_ACCEPT = _VERIFY_CB_TYPE(lambda ok, store: 1)


def _accept_any_client_certificate(ctx: ssl.SSLContext) -> bool:
    """Make the handshake accept any client certificate, as Go's ``RequestClientCert``
    does for kube-apiserver (the ``ssl`` module has no such mode: with CERT_OPTIONAL a
    certificate from another CA aborts the handshake). Done through OpenSSL's
    ``SSL_CTX_set_verify`` on the context's ``SSL_CTX`` (the pointer right after the
    object header of CPython's ``PySSLContext``), checked first by reading the verify
    mode back; False (the ssl module's behaviour kept) when that check fails."""
    try:
        lib = ctypes.CDLL(_ssl.__file__)  # resolves libssl's symbols as _ssl links them
        get_mode = lib.SSL_CTX_get_verify_mode
        get_mode.restype, get_mode.argtypes = ctypes.c_int, [ctypes.c_void_p]
        set_verify = lib.SSL_CTX_set_verify
        set_verify.restype = None
        set_verify.argtypes = [ctypes.c_void_p, ctypes.c_int, _VERIFY_CB_TYPE]
        ptr = ctypes.c_void_p.from_address(id(ctx) + object.__basicsize__).value
        if not ptr or get_mode(ptr) != _SSL_VERIFY_PEER:
            return False
        set_verify(ptr, _SSL_VERIFY_PEER, _ACCEPT)
        return True
    except (OSError, AttributeError, ValueError):
        return False


_SSL_VERIFY_PEER = 1


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def generate(
    directory: str | Path, hosts: tuple[str, ...] = ("127.0.0.1", "localhost")
) -> TlsFiles:
    """Write ``ca.crt``, ``server.crt``, ``server.key`` into ``directory``; the server
    certificate names every entry of ``hosts`` (IP addresses or DNS names) plus the
    in-cluster names ``kubernetes``, ``kubernetes.default``, ``kubernetes.default.svc``,
    ``kubernetes.default.svc.cluster.local``."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
    later = now + datetime.timedelta(days=365)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(_name("timewarp-ca"))
        .issuer_name(_name("timewarp-ca"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(later)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = []
    in_cluster = (
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local",
    )
    for host in (*hosts, *in_cluster):
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("kube-apiserver"))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(later)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    files = TlsFiles(
        directory / "ca.crt",
        directory / "server.crt",
        directory / "server.key",
        directory / "ca.key",
    )
    files.ca_cert.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    files.server_cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    for path, private in ((files.server_key, key), (files.ca_key, ca_key)):
        path.touch(mode=0o600)
        path.chmod(0o600)
        path.write_bytes(private_pem(private))
    return files


def private_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
