//! The Secret's layout: four keys, PEM each. `ca.crt` is the CA bundle the
//! CRD's caBundle copies; `tls.crt` / `tls.key` what every replica serves.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;

use super::certs::Material;

pub const CA_CRT: &str = "ca.crt";
pub const CA_KEY: &str = "ca.key";
pub const TLS_CRT: &str = "tls.crt";
pub const TLS_KEY: &str = "tls.key";

/// The material in a Secret's data; a missing or non-UTF-8 key reads as
/// empty (the plan then replaces it).
pub fn material(data: Option<&BTreeMap<String, ByteString>>) -> Material {
    let get = |k: &str| {
        data.and_then(|d| d.get(k)).and_then(|b| String::from_utf8(b.0.clone()).ok()).unwrap_or_default()
    };
    Material { ca_crt: get(CA_CRT), ca_key: get(CA_KEY), tls_crt: get(TLS_CRT), tls_key: get(TLS_KEY) }
}

/// The Secret's data for `m`.
pub fn data(m: &Material) -> BTreeMap<String, ByteString> {
    [(CA_CRT, &m.ca_crt), (CA_KEY, &m.ca_key), (TLS_CRT, &m.tls_crt), (TLS_KEY, &m.tls_key)]
        .into_iter()
        .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_material_round_trips_through_the_secret_and_absent_keys_read_empty() {
        let m = Material { ca_crt: "a".into(), ca_key: "b".into(), tls_crt: "c".into(), tls_key: "d".into() };
        assert_eq!(material(Some(&data(&m))), m);
        assert_eq!(material(None), Material::default());
        let mut d = data(&m);
        d.insert(TLS_KEY.into(), ByteString(vec![0xff]));
        assert_eq!(material(Some(&d)).tls_key, "");
    }
}
