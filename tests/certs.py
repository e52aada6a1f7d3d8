"""Throw-away TLS material made at test time with ``cryptography``: a CA, a server certificate
for localhost/127.0.0.1, and client certificates (signed by that CA or by a stranger's)."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class Pair:
    cert: Path
    key: Path


@dataclass(frozen=True)
class Certs:
    ca: Path             # the CA that signed server and client
    server: Pair         # CN/SAN localhost and 127.0.0.1
    client: Pair         # a client certificate signed by ``ca``
    stranger_ca: Path    # another CA
    stranger: Pair       # a client certificate signed by ``stranger_ca``


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> None:
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                       serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))


def _builder(subject: str, issuer: x509.Name, public: ec.EllipticCurvePublicKey) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.timezone.utc)
    return (x509.CertificateBuilder().subject_name(_name(subject)).issuer_name(issuer)
            .public_key(public).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1)))


def _ca(directory: Path, stem: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (_builder(f"kgb test {stem}", _name(f"kgb test {stem}"), key.public_key())
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))
    path = directory / f"{stem}.pem"
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return key, cert, path


def _leaf(directory: Path, stem: str, ca_key: ec.EllipticCurvePrivateKey, ca: x509.Certificate,
          server: bool) -> Pair:
    key = ec.generate_private_key(ec.SECP256R1())
    b = _builder("localhost" if server else f"kgb test {stem}", ca.subject, key.public_key())
    b = b.add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
    if server:
        b = b.add_extension(x509.SubjectAlternativeName([
            x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False)
    usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
    b = b.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    cert = b.sign(ca_key, hashes.SHA256())
    pair = Pair(directory / f"{stem}.crt", directory / f"{stem}.key")
    pair.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    _write_key(key, pair.key)
    return pair


def make_certs(directory: Path) -> Certs:
    directory.mkdir(parents=True, exist_ok=True)
    ca_key, ca, ca_path = _ca(directory, "ca")
    other_key, other, other_path = _ca(directory, "stranger-ca")
    return Certs(ca=ca_path, server=_leaf(directory, "server", ca_key, ca, True),
                 client=_leaf(directory, "client", ca_key, ca, False),
                 stranger_ca=other_path, stranger=_leaf(directory, "stranger", other_key, other, False))
