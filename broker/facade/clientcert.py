"""Client certificates: issued by the run's CA, they authenticate as kube-apiserver's x509
authenticator does — the subject's Common Name is the user, each Organization a group.

The TLS handshake takes any certificate (``tls.py``); this module decides per connection
whether the one presented proves anything: signed by the run's CA, within its validity
(wall clock: TLS checks real time), usable for client authentication. A certificate that
does not is no identity at all, so the request gets 401 (unless a valid bearer token
comes with it), as from kube-apiserver.
"""

from __future__ import annotations

import datetime
import threading
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from .tls import TlsFiles, private_pem

# certificates seen (DER) -> (user, groups) or None; bounded: a client could send many
_CACHE_MAX = 1024


class CertAuthenticator:
    """``identify(der)``: (user, groups) proven by a client certificate, or None."""

    def __init__(self, ca_cert_pem: bytes) -> None:
        self._ca = x509.load_pem_x509_certificate(ca_cert_pem)
        self._lock = threading.Lock()
        self._seen: dict[bytes, tuple[str, tuple[str, ...]] | None] = {}

    def identify(self, der: bytes | None) -> tuple[str, tuple[str, ...]] | None:
        if not der:
            return None
        with self._lock:
            if der in self._seen:
                return self._seen[der]
        found = self._check(der)
        with self._lock:
            if len(self._seen) >= _CACHE_MAX:
                self._seen.clear()
            self._seen[der] = found
        return found

    def _check(self, der: bytes) -> tuple[str, tuple[str, ...]] | None:
        try:
            cert = x509.load_der_x509_certificate(der)
            cert.verify_directly_issued_by(self._ca)
        except (ValueError, TypeError, InvalidSignature):
            return None
        now = datetime.datetime.now(datetime.UTC)
        if not cert.not_valid_before_utc <= now <= cert.not_valid_after_utc:
            return None
        try:
            usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        except x509.ExtensionNotFound:
            usage = None
        if usage is not None and ExtendedKeyUsageOID.CLIENT_AUTH not in usage:
            return None
        names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
        if not names or not str(names[0].value):
            return None  # kube-apiserver: "common name is empty" -> not authenticated
        groups = tuple(
            str(a.value) for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)
        )
        return str(names[0].value), groups


def issue(tls: TlsFiles, user: str, groups: tuple[str, ...] = ()) -> tuple[bytes, bytes]:
    """A client certificate for ``user`` in ``groups`` signed by the run's CA, valid for a
    year of wall time: (certificate PEM, private key PEM)."""
    ca_cert = x509.load_pem_x509_certificate(Path(tls.ca_cert).read_bytes())
    ca_key = serialization.load_pem_private_key(Path(tls.ca_key).read_bytes(), password=None)
    return issue_with(ca_cert, ca_key, user, groups)


def issue_with(
    ca_cert: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    user: str,
    groups: tuple[str, ...] = (),
) -> tuple[bytes, bytes]:
    """As :func:`issue`, with the CA given (tests make certificates of a foreign CA)."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name(
        [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups]
        + [x509.NameAttribute(NameOID.COMMON_NAME, user)]
    )
    now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=365))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM), private_pem(key)
