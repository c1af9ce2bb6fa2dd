//! A creator killed with SIGKILL at the worst moment (segment created and
//! fully allocated, name not yet removed because the other ranks have not
//! attached) must not leak the segment past the next setup on the node, and
//! a local user who pre-creates the names we would pick must not deny us
//! shared memory.

use std::io::Read;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use super::super::establish;
use super::super::naming::{Creator, creator_of, fresh_name, process_state};
use super::super::reap::{is_gone, reap_orphans};
use super::super::record::{RECORD_LEN, Record};
use super::super::segment::dev_shm_path;
use super::cross_process::{Child, SocketExchange};
use super::establish_all;
use crate::test_support::PATIENCE;
use crate::transport::{Exchange, TransportError};

const WINDOW_LEN: usize = 4096 + 64;

/// Forks; the child runs `body` and leaves with its return value as exit
/// status, never returning into the harness.
fn fork_child(body: impl FnOnce() -> i32) -> Child {
    // SAFETY: the child only runs `body` (setup code and file operations,
    // nothing another harness thread could have left locked except the
    // allocator, which glibc's fork makes safe) and leaves through `_exit`.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed: {}", std::io::Error::last_os_error());
    if pid == 0 {
        let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)).unwrap_or(99);
        // SAFETY: ends the child at once, as a forked test child must.
        unsafe { libc::_exit(code) };
    }
    Child { pid, reaped: false }
}

/// Forks a rank 0 of 2 that creates the segment, sends its record and then
/// waits for rank 1's, which never comes; kills it there, the moment a kill
/// leaks the segment. Returns the segment's name, or `None` when the
/// segment was already gone after the kill: another coll rdma setup on this
/// node (a concurrent test or job) reaped it first, which is the behaviour
/// under test, but leaves this run nothing to observe.
fn kill_a_creator_during_setup() -> Option<String> {
    let (parent_end, child_end) = UnixStream::pair().expect("socketpair");
    parent_end.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut child = fork_child(|| {
        let Ok(stream) = child_end.try_clone() else { return 20 };
        let _ = establish(&SocketExchange { stream, rank: 0 }, 0, 2, WINDOW_LEN);
        10
    });
    drop(child_end);

    let mut record = [0u8; RECORD_LEN];
    (&parent_end).read_exact(&mut record).expect("the child's setup record");
    let name = Record::decode(&record).expect("a setup record").segment_name;
    assert!(!name.is_empty(), "the child created no segment");
    assert!(dev_shm_path(&name).exists(), "{name} is not in /dev/shm while its creator waits");

    // SAFETY: signalling our own child, not yet reaped.
    assert_eq!(unsafe { libc::kill(child.pid, libc::SIGKILL) }, 0);
    assert_eq!(child.wait(PATIENCE), None, "the child was not killed");
    dev_shm_path(&name).exists().then_some(name)
}

#[test]
fn a_segment_left_by_a_creator_killed_during_setup_is_removed_by_the_next_setup() {
    const ATTEMPTS: usize = 10;
    let name = (0..ATTEMPTS).find_map(|_| kill_a_creator_during_setup()).unwrap_or_else(|| {
        panic!("in {ATTEMPTS} attempts, another setup on this node always reaped the killed creator's segment before this test could look")
    });
    let path = dev_shm_path(&name);

    let transports = establish_all(2, WINDOW_LEN);
    let still_there = path.exists();
    // Never leave it behind, whatever the verdict.
    let _ = std::fs::remove_file(&path);
    assert!(!still_there, "{name}, left by a killed creator, survived the next setup on this node");
    assert!(!dev_shm_path(transports[0].segment_name()).exists());
}

/// A one-rank exchange: the rank's own record is everything.
struct Alone;

impl Exchange for Alone {
    fn allgather(&self, mine: &[u8], all: &mut [u8]) -> Result<(), TransportError> {
        all.copy_from_slice(mine);
        Ok(())
    }
}

/// The names releases up to fb6e096 used: pid and a per-process counter.
fn predictable_names(pid: libc::pid_t) -> impl Iterator<Item = std::path::PathBuf> {
    (0..4096).map(move |counter| dev_shm_path(&format!("/coll_rdma.{pid}.{counter}")))
}

#[test]
fn names_squatted_by_another_user_do_not_deny_shared_memory() {
    // In a child, so that the squatting cannot disturb other tests: it
    // pre-creates every name a predictable scheme would give it, as a local
    // attacker could, then sets up shared memory.
    let mut child = fork_child(|| {
        // SAFETY: getpid cannot fail.
        let me = unsafe { libc::getpid() };
        for path in predictable_names(me) {
            if std::fs::File::create(&path).is_err() {
                return 20;
            }
        }
        match establish(&Alone, 0, 1, WINDOW_LEN) {
            Ok(_) => 0,
            Err(_) => 30,
        }
    });
    let code = child.wait(PATIENCE);
    for path in predictable_names(child.pid) {
        let _ = std::fs::remove_file(path);
    }
    match code {
        Some(0) => {}
        Some(20) => panic!("the child could not create files in /dev/shm"),
        Some(30) => panic!("pre-created names denied shared memory to the setup"),
        other => panic!("child killed, crashed or hung ({other:?})"),
    }
}

#[test]
fn only_segments_whose_creator_is_gone_are_judged_orphans() {
    let here = Creator::current().expect("/proc describes this process");
    // SAFETY: getppid cannot fail.
    let parent = unsafe { libc::getppid() } as u32;
    let parent_start = process_state(parent).expect("the parent runs").start;
    let alive = Creator { origin: here.origin, pid: parent, start: parent_start };
    assert!(!is_gone(here, here), "this process judged itself dead");
    assert!(!is_gone(alive, here), "a running process judged dead");
    assert!(is_gone(Creator { start: parent_start + 1, ..alive }, here), "a reused pid was taken for the creator");
    assert!(!is_gone(Creator { origin: here.origin ^ 1, start: parent_start + 1, ..alive }, here), "judged a pid of another boot or PID namespace");
    let unknown = Creator { pid: parent, start: parent_start + 1, ..Creator::unknown() };
    assert!(!is_gone(unknown, Creator { origin: unknown.origin, ..here }), "judged a creator that could not read /proc");

    let mut zombie = fork_child(|| 0);
    let zombie_pid = zombie.pid as u32;
    let deadline = std::time::Instant::now() + PATIENCE;
    while !process_state(zombie_pid).is_some_and(|state| state.zombie) {
        assert!(std::time::Instant::now() < deadline, "the child never became a zombie");
        std::thread::sleep(Duration::from_millis(5));
    }
    let zombie_start = process_state(zombie_pid).unwrap().start;
    assert!(is_gone(Creator { origin: here.origin, pid: zombie_pid, start: zombie_start }, here), "a zombie can remove nothing");
    assert_eq!(zombie.wait(PATIENCE), Some(0));
    assert!(is_gone(Creator { origin: here.origin, pid: zombie_pid, start: zombie_start }, here), "an exited, reaped creator");
}

#[test]
fn the_reaper_removes_our_orphans_and_nothing_else() {
    let here = Creator::current().expect("/proc describes this process");
    let mut exited = fork_child(|| 0);
    assert_eq!(exited.wait(PATIENCE), Some(0));
    let dead = Creator { pid: exited.pid as u32, start: 1, ..here };

    let orphan = fresh_name(dead).unwrap();
    let living = fresh_name(here).unwrap();
    let foreign_boot = fresh_name(Creator { origin: here.origin ^ 0x8000_0000, ..dead }).unwrap();
    let other_format = format!("/coll_rdma.{}.0", exited.pid);
    let names = [&orphan, &living, &foreign_boot, &other_format];
    for name in names {
        std::fs::write(dev_shm_path(name), b"x").unwrap();
    }
    assert_eq!(creator_of(&orphan), Some(dead));

    // SAFETY: geteuid cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let someone_else = dev_shm_path(&fresh_name(dead).unwrap());
    if root {
        std::fs::write(&someone_else, b"x").unwrap();
        std::os::unix::fs::chown(&someone_else, Some(65_534), None).unwrap();
    } else {
        println!("SKIPPED (part): only root can make a file another user owns");
    }

    reap_orphans();
    let exists = |name: &str| dev_shm_path(name).exists();
    let verdict = (exists(&orphan), exists(&living), exists(&foreign_boot), exists(&other_format), someone_else.exists());
    for name in names {
        let _ = std::fs::remove_file(dev_shm_path(name));
    }
    let _ = std::fs::remove_file(&someone_else);
    assert_eq!(verdict, (false, true, true, true, root), "(orphan, living creator, other boot, other format, other user) present after reaping");
}
