#!/usr/bin/env python3
"""Writes the certificates the conversion checks' unit tests read.

The fixtures' clock is 2026-01-01T12:00:00Z (checks/fixtures.rs), so each
certificate has fixed dates around it: a CA and a serving certificate valid
for years, a serving certificate and a CA that end 9 days after it (near
expiry), one that ended before it, and a second CA that signed nothing here
(the caBundle that does not match). Re-run from this directory to
regenerate them (needs the `cryptography` package); the tests only read
the files.
"""
import datetime as dt

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

SERVICE_DNS = "runner-webhook.runner-system.svc"


def at(s):
    return dt.datetime.fromisoformat(s).replace(tzinfo=dt.timezone.utc)


def name(cn):
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def ca(cn, not_before, not_after):
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name(cn))
        .issuer_name(name(cn))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(at(not_before))
        .not_valid_after(at(not_after))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )
        .sign(key, hashes.SHA256())
    )
    return key, cert


def serving(issuer_key, issuer, not_before, not_after):
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name(SERVICE_DNS))
        .issuer_name(issuer.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(at(not_before))
        .not_valid_after(at(not_after))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(SERVICE_DNS)]), critical=False)
        .sign(issuer_key, hashes.SHA256())
    )
    return cert


def write(path, cert):
    with open(path, "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    print(path)


ca_key, ca_cert = ca("runner-webhook-ca", "2025-06-01T00:00:00", "2035-06-01T00:00:00")
write("ca.pem", ca_cert)
write("serving.pem", serving(ca_key, ca_cert, "2025-12-01T00:00:00", "2026-12-01T00:00:00"))
write("serving_soon.pem", serving(ca_key, ca_cert, "2025-10-01T00:00:00", "2026-01-10T12:00:00"))
write("serving_expired.pem", serving(ca_key, ca_cert, "2025-09-01T00:00:00", "2025-12-25T00:00:00"))
soon_key, soon_cert = ca("runner-webhook-ca", "2025-01-01T00:00:00", "2026-01-10T12:00:00")
write("ca_soon.pem", soon_cert)
write("serving_under_ca_soon.pem", serving(soon_key, soon_cert, "2025-12-01T00:00:00", "2026-12-01T00:00:00"))
_, other = ca("another-ca", "2025-06-01T00:00:00", "2035-06-01T00:00:00")
write("other_ca.pem", other)
