//! Which interface this rank's udp transport uses: the one named by
//! `coll_rdma_udp_interface`, else the one Open MPI's own out-of-band
//! traffic uses. Neither Open MPI 4 (ORTE) nor 5 (PRRTE) tells a rank
//! that address: the URIs in its environment are where its daemon
//! listens (every interface, loopback, or the one PMIx picked). But
//! the daemon (`orted`, `prted`) holds a TCP connection to `mpirun` over
//! the out-of-band network, and `mpirun` holds one from every remote
//! daemon, so the local address of the nearest launcher ancestor's
//! established non-loopback TCP connections is that interface's address,
//! read from `/proc` the same way under both versions. A launcher with no
//! such connection (`mpirun` alone on its host) falls back to the route
//! the kernel takes towards the group range, then towards an address of
//! the launcher's URI found in the rank's environment.

use std::collections::HashSet;
use std::net::{Ipv4Addr, SocketAddrV4};

use btl_ibmc::udp::{interface_address, route_source};

use super::params::UdpSettings;

/// This rank's interface and how it was chosen, for verbose output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct ChosenInterface {
    pub address: Ipv4Addr,
    pub how: String,
}

/// Names (as `/proc/PID/comm` shows them) of the processes that launch
/// ranks and carry Open MPI's out-of-band traffic.
const LAUNCHERS: [&str; 7] = ["orted", "prted", "mpirun", "mpiexec", "orterun", "prterun", "prte"];

/// Ancestors looked at: the rank's parent is its daemon, or a wrapper or
/// two (`sh -c`, `env`, `timeout`) below it.
const MOST_ANCESTORS: usize = 8;

/// Environment variables that hold a launcher's URI (`ID;tcp://A,B:PORT`):
/// Open MPI 4's mpirun and local daemon, and PMIx servers of both versions.
const URI_VARIABLES: [&str; 7] = [
    "OMPI_MCA_orte_local_daemon_uri",
    "OMPI_MCA_orte_hnp_uri",
    "PMIX_SERVER_URI41",
    "PMIX_SERVER_URI4",
    "PMIX_SERVER_URI3",
    "PMIX_SERVER_URI21",
    "PMIX_SERVER_URI2",
];

/// The interface for `settings`, or why there is none.
pub(super) fn choose(settings: &UdpSettings) -> Result<ChosenInterface, String> {
    if let Some(name) = &settings.interface {
        return interface_address(name)
            .map(|address| ChosenInterface { address, how: format!("coll_rdma_udp_interface={name}") })
            .map_err(|why| format!("coll_rdma_udp_interface={name}: {why}"));
    }
    let launcher = match launcher_connection_address() {
        Ok(chosen) => return Ok(chosen),
        Err(why) => why,
    };
    let group = SocketAddrV4::new(settings.group_base, settings.port_base);
    let group_route = match route_source(group) {
        Ok(address) => {
            return Ok(ChosenInterface { address, how: format!("the kernel's route towards the group range {}/{}", settings.group_base, settings.group_prefix_len) })
        }
        Err(why) => format!("no route towards {}: {why}", group.ip()),
    };
    let uri_route = match uri_route() {
        Ok(chosen) => return Ok(chosen),
        Err(why) => why,
    };
    Err(format!("no interface found for udp ({launcher}; {group_route}; {uri_route}); set coll_rdma_udp_interface"))
}

/// The address of the nearest launcher ancestor's out-of-band connection.
fn launcher_connection_address() -> Result<ChosenInterface, String> {
    let mut pid = std::os::unix::process::parent_id();
    for _ in 0..MOST_ANCESTORS {
        if pid <= 1 {
            break;
        }
        let name = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default().trim().to_string();
        if LAUNCHERS.contains(&name.as_str()) {
            let address = outside_connection_address(pid).map_err(|why| format!("the launcher {name} (pid {pid}) {why}"))?;
            return Ok(ChosenInterface { address, how: format!("Open MPI's out-of-band connection, of {name} (pid {pid})") });
        }
        pid = parent_of(pid).ok_or_else(|| format!("the parent of pid {pid} is unknown"))?;
    }
    Err("no Open MPI launcher (orted, prted, mpirun...) among this rank's ancestors".to_string())
}

/// The parent of `pid`, from `/proc/PID/stat` (after the command, which
/// may hold spaces and parentheses: the last `)` ends it).
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_command = &stat[stat.rfind(')')? + 1..];
    after_command.split_whitespace().nth(1)?.parse().ok()
}

/// The local address most of `pid`'s established TCP connections leave
/// from, leaving out loopback; or why there is none.
fn outside_connection_address(pid: u32) -> Result<Ipv4Addr, String> {
    let sockets = socket_inodes(pid)?;
    let mut seen: Vec<(Ipv4Addr, usize)> = Vec::new();
    for table in ["tcp", "tcp6"] {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")) else { continue };
        for address in established_local_addresses(&text, &sockets) {
            match seen.iter_mut().find(|(known, _)| *known == address) {
                Some((_, count)) => *count += 1,
                None => seen.push((address, 1)),
            }
        }
    }
    // The most used; on a tie the first seen.
    let best = seen.iter().rev().max_by_key(|(_, count)| *count).map(|(address, _)| *address);
    best.ok_or_else(|| "holds no established TCP connection beyond loopback (no remote daemon)".to_string())
}

/// The inodes of `pid`'s open sockets.
fn socket_inodes(pid: u32) -> Result<HashSet<u64>, String> {
    let entries = std::fs::read_dir(format!("/proc/{pid}/fd")).map_err(|why| format!("cannot list its descriptors: {why}"))?;
    Ok(entries
        .filter_map(|entry| std::fs::read_link(entry.ok()?.path()).ok())
        .filter_map(|target| target.to_str()?.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok())
        .collect())
}

/// The local IPv4 addresses (loopback and unspecified left out) of the
/// ESTABLISHED connections in a `/proc/net/tcp` or `tcp6` table whose
/// inode is one of `sockets`.
fn established_local_addresses(table: &str, sockets: &HashSet<u64>) -> Vec<Ipv4Addr> {
    const ESTABLISHED: &str = "01";
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let inode: u64 = fields.get(9)?.parse().ok()?;
            if *fields.get(3)? != ESTABLISHED || !sockets.contains(&inode) {
                return None;
            }
            table_address(fields.get(1)?.split(':').next()?)
        })
        .filter(|address| !address.is_loopback() && !address.is_unspecified())
        .collect()
}

/// An address as `/proc/net/tcp` prints it: the 32-bit words of the
/// network-order address, each as a native-endian number in hex; in
/// `tcp6`, an IPv4-mapped address (`::ffff:a.b.c.d`) is taken as IPv4.
fn table_address(hex: &str) -> Option<Ipv4Addr> {
    let word = |hex: &str| u32::from_str_radix(hex, 16).ok().map(|word| Ipv4Addr::from(word.to_ne_bytes()));
    match hex.len() {
        8 => word(hex),
        32 => {
            let words: Vec<u32> = (0..4).map(|i| u32::from_str_radix(&hex[8 * i..8 * i + 8], 16).ok()).collect::<Option<_>>()?;
            let mapped = words[0] == 0 && words[1] == 0 && words[2].to_ne_bytes() == [0, 0, 0xff, 0xff];
            mapped.then(|| Ipv4Addr::from(words[3].to_ne_bytes()))
        }
        _ => None,
    }
}

/// The route towards the first launcher address in the environment.
fn uri_route() -> Result<ChosenInterface, String> {
    let mut tried = Vec::new();
    for variable in URI_VARIABLES {
        let Ok(uri) = std::env::var(variable) else { continue };
        for target in uri_addresses(&uri) {
            match route_source(SocketAddrV4::new(target, 9)) {
                Ok(address) => return Ok(ChosenInterface { address, how: format!("the kernel's route towards the launcher's address {target} (from {variable})") }),
                Err(why) => tried.push(format!("{target}: {why}")),
            }
        }
    }
    if tried.is_empty() {
        Err("no launcher address beyond loopback in the environment".to_string())
    } else {
        Err(format!("no route towards the launcher ({})", tried.join(", ")))
    }
}

/// The IPv4 addresses, loopback left out, of a launcher URI such as
/// `1234.0;tcp://10.0.0.1,192.168.1.5:4500` (several `;`-separated parts,
/// each address list ending in `:PORT`).
fn uri_addresses(uri: &str) -> Vec<Ipv4Addr> {
    uri.split(';')
        .filter_map(|part| part.split_once("://").map(|(_, rest)| rest))
        .flat_map(|rest| {
            let list = rest.rsplit_once(':').map_or(rest, |(list, _port)| list);
            list.split(',').filter_map(|address| address.trim().parse::<Ipv4Addr>().ok()).collect::<Vec<_>>()
        })
        .filter(|address| !address.is_loopback() && !address.is_unspecified())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn launcher_uris_give_their_outside_addresses() {
        let four = "3126329344.0;tcp://192.0.2.2,10.1.0.7:40321";
        assert_eq!(uri_addresses(four), [Ipv4Addr::new(192, 0, 2, 2), Ipv4Addr::new(10, 1, 0, 7)]);
        assert_eq!(uri_addresses("prterun-host-77@0.0;tcp4://127.0.0.1:34211"), Vec::<Ipv4Addr>::new());
        assert_eq!(uri_addresses("pmix-server.77;tcp4://127.0.0.1:3;tcp://10.2.3.4:5"), [Ipv4Addr::new(10, 2, 3, 4)]);
        assert_eq!(uri_addresses("garbage"), Vec::<Ipv4Addr>::new());
    }

    #[test]
    fn table_addresses_read_in_native_word_order() {
        let loopback = u32::from_ne_bytes([127, 0, 0, 1]);
        assert_eq!(table_address(&format!("{loopback:08X}")), Some(Ipv4Addr::LOCALHOST));
        let mapped = format!("{:08X}{:08X}{:08X}{:08X}", 0, 0, u32::from_ne_bytes([0, 0, 0xff, 0xff]), u32::from_ne_bytes([10, 1, 2, 3]));
        assert_eq!(table_address(&mapped), Some(Ipv4Addr::new(10, 1, 2, 3)));
        let native_v6 = format!("{:08X}{:08X}{:08X}{:08X}", u32::from_ne_bytes([0xfd, 0, 0, 0]), 0, 0, 2);
        assert_eq!(table_address(&native_v6), None);
        assert_eq!(table_address("zz"), None);
    }

    #[test]
    fn only_established_outside_connections_of_the_sockets_count() {
        let hex = |octets: [u8; 4]| format!("{:08X}", u32::from_ne_bytes(octets));
        let line = |local: [u8; 4], state: &str, inode: u64| {
            format!("   0: {}:1F90 {}:C350 {state} 00000000:00000000 00:00000000 00000000  1000        0 {inode} 1 0 20 4 30 10 -1", hex(local), hex([10, 0, 0, 9]))
        };
        let table = [
            "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode".to_string(),
            line([10, 0, 0, 1], "01", 11),
            line([10, 0, 0, 2], "0A", 12),
            line([127, 0, 0, 1], "01", 13),
            line([10, 0, 0, 3], "01", 99),
        ]
        .join("\n");
        let sockets: HashSet<u64> = [11, 12, 13].into_iter().collect();
        assert_eq!(established_local_addresses(&table, &sockets), [Ipv4Addr::new(10, 0, 0, 1)]);
    }

    #[test]
    fn a_process_connection_beyond_loopback_is_found_in_proc() {
        // This process plays the launcher: a connection to itself on the
        // address the kernel routes outwards from.
        let outside = match route_source(SocketAddrV4::new(Ipv4Addr::new(192, 0, 2, 250), 9)) {
            Ok(address) if !address.is_loopback() => address,
            other => {
                println!("SKIPPED a_process_connection_beyond_loopback_is_found_in_proc: no interface beyond loopback here ({other:?})");
                return;
            }
        };
        let listener = TcpListener::bind(SocketAddrV4::new(outside, 0)).expect("listening on the outside address");
        let _client = TcpStream::connect(listener.local_addr().unwrap()).expect("connecting to itself");
        let _server = listener.accept().expect("accepting");
        assert_eq!(outside_connection_address(std::process::id()), Ok(outside));
    }

    #[test]
    fn the_parent_is_read_from_proc() {
        assert_eq!(parent_of(std::process::id()), Some(std::os::unix::process::parent_id()));
    }

    #[test]
    fn a_named_interface_resolves_and_a_missing_one_says_so() {
        let named = |name: &str| choose(&UdpSettings { interface: Some(name.to_string()), ..UdpSettings::default() });
        assert_eq!(named("lo").map(|chosen| chosen.address), Ok(Ipv4Addr::LOCALHOST));
        let why = named("no-such-if0").unwrap_err();
        assert!(why.starts_with("coll_rdma_udp_interface=no-such-if0: no interface named \"no-such-if0\""), "{why}");
    }
}
