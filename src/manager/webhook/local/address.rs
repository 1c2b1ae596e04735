//! An address the apiserver can reach this process at, found without a
//! manual step: the address this machine would send from to reach the
//! apiserver. For a control plane on the loopback that is the loopback;
//! for kind, the gateway of the Docker network the node sits on (the
//! kernel's route to the node's address leaves by that bridge). The
//! apiserver's own address comes from the `kubernetes` Service's
//! EndpointSlice (its advertise address: the kubeconfig of a kind cluster
//! names a port forwarded on the loopback, not the node), else from the
//! kubeconfig's server.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};

use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, ListParams};

/// The apiserver's advertise address, if the cluster publishes one this
/// identity may read.
pub async fn advertised(client: &kube::Client) -> Option<IpAddr> {
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), "default");
    let lp = ListParams::default().labels("kubernetes.io/service-name=kubernetes");
    let list = slices.list(&lp).await.ok()?;
    list.items
        .iter()
        .flat_map(|s| s.endpoints.iter().flatten())
        .flat_map(|e| e.addresses.iter())
        .find_map(|a| a.parse().ok())
}

/// The local address the kernel picks to send to `peer` (connecting a UDP
/// socket sends nothing). The loopback answers for itself.
pub fn route_to(peer: IpAddr) -> std::io::Result<IpAddr> {
    if peer.is_loopback() {
        return Ok(peer);
    }
    let any: IpAddr =
        if peer.is_ipv4() { Ipv4Addr::UNSPECIFIED.into() } else { Ipv6Addr::UNSPECIFIED.into() };
    let socket = UdpSocket::bind(SocketAddr::new(any, 0))?;
    socket.connect(SocketAddr::new(peer, 443))?;
    Ok(socket.local_addr()?.ip())
}

/// Pure: the kubeconfig server's host as an address; a name resolves to
/// the loopback only when it is `localhost` (others are not looked up:
/// the EndpointSlice is the better source).
pub fn server_ip(host: &str) -> Option<IpAddr> {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    match host {
        "localhost" => Some(Ipv4Addr::LOCALHOST.into()),
        h => h.parse().ok(),
    }
}

/// `https://host:port` for `host` (an IPv6 address in brackets).
pub fn origin(host: &str, port: u16) -> String {
    match host.parse::<IpAddr>() {
        Ok(IpAddr::V6(v6)) => format!("https://[{v6}]:{port}"),
        _ => format!("https://{host}:{port}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loopback_reaches_itself_and_a_peer_is_reached_from_a_local_address() {
        assert_eq!(route_to(Ipv4Addr::LOCALHOST.into()).unwrap(), IpAddr::from(Ipv4Addr::LOCALHOST));
        assert_eq!(route_to("127.0.0.5".parse().unwrap()).unwrap().to_string(), "127.0.0.5");
    }

    #[test]
    fn server_hosts_and_origins() {
        assert_eq!(server_ip("127.0.0.1"), Some(Ipv4Addr::LOCALHOST.into()));
        assert_eq!(server_ip("[::1]"), Some(Ipv6Addr::LOCALHOST.into()));
        assert_eq!(server_ip("localhost"), Some(Ipv4Addr::LOCALHOST.into()));
        assert_eq!(server_ip("cluster.example"), None);
        assert_eq!(origin("::1", 9443), "https://[::1]:9443");
        assert_eq!(origin("172.18.0.1", 1), "https://172.18.0.1:1");
        assert_eq!(origin("dev.example", 2), "https://dev.example:2");
    }
}
