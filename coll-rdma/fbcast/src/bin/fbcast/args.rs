//! The command line.

use coll_rdma_fbcast::Policy;
use std::path::PathBuf;

pub const USAGE: &str = "\
usage: fbcast [options] SRC [DST]
  Sends SRC (a file, or a directory with everything below it) from one rank
  to DST on every other rank (default DST: the same path as SRC). Run it
  under mpirun with one rank per host, or give --hosts/--hostfile and it
  starts mpirun itself.

  --hosts H1,H2,...      start `mpirun --host H1,H2,... -np N --map-by node`
                         (N = the number of names; the first runs the root)
  --hostfile FILE        start `mpirun --hostfile FILE -np N --map-by node`
                         (N = the hosts FILE names, one per line)
  --mpirun-arg ARG       one more argument for that mpirun (repeatable)
  --root N               the rank that reads SRC (default 0)
  --overwrite POLICY     changed (default): write unless DST holds the same
                         contents; never: fail where DST exists with other
                         contents; always: write even over identical contents
  --chunk SIZE           bytes per MPI_Bcast (suffix K, M, G; default 4M;
                         4K..2G-1)
  --fsync                fsync each file before renaming it into place
  --progress             show the progress line even when stderr is not a
                         terminal (under mpirun it is a pipe: --hosts and
                         --hostfile add --progress when fbcast's own stderr
                         is a terminal)
  --no-progress          never show it
  -q, --quiet            print nothing but errors
  -h, --help             this text
  DST may contain %h (the host's name), %r (the rank) and %% (a %).
  Exit status: 0, or the return code of coll_rdma_bcast_file (1-9, the same
  on every rank; coll_rdma_fbcast.h), or 64 for a usage error.";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Launch {
    /// Already a rank of an MPI job.
    Rank,
    Hosts(Vec<String>),
    Hostfile(PathBuf),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Args {
    pub launch: Launch,
    pub mpirun_args: Vec<String>,
    pub root: i32,
    pub policy: Policy,
    pub chunk_bytes: usize,
    pub fsync: bool,
    pub progress: Option<bool>,
    pub quiet: bool,
    pub src: PathBuf,
    pub dst: String,
}

pub enum Parsed {
    Run(Args),
    Help,
}

/// `4M`, `65536`, `1G`: bytes.
pub fn parse_size(text: &str) -> Option<usize> {
    let (digits, unit) = match text.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => text.split_at(i),
        None => (text, ""),
    };
    let shift = match unit {
        "" => 0,
        "K" | "k" | "KiB" => 10,
        "M" | "m" | "MiB" => 20,
        "G" | "g" | "GiB" => 30,
        _ => return None,
    };
    digits.parse::<usize>().ok()?.checked_mul(1usize << shift)
}

pub fn parse(argv: &[String]) -> Result<Parsed, String> {
    let mut launch = Launch::Rank;
    let mut mpirun_args = Vec::new();
    let mut root = 0;
    let mut policy = Policy::IfDifferent;
    let mut chunk_bytes = coll_rdma_fbcast::DEFAULT_CHUNK_BYTES;
    let mut fsync = false;
    let mut progress = None;
    let mut quiet = false;
    let mut positional = Vec::new();
    let mut it = argv.iter();
    while let Some(arg) = it.next() {
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v.to_string())),
            _ => (arg.as_str(), None),
        };
        let mut value = |what: &str| -> Result<String, String> {
            inline.clone().or_else(|| it.next().cloned()).ok_or_else(|| format!("{name} needs {what}"))
        };
        match name {
            "-h" | "--help" => return Ok(Parsed::Help),
            "--hosts" => {
                let hosts: Vec<String> = value("a list of hosts")?.split(',').filter(|h| !h.is_empty()).map(str::to_string).collect();
                if hosts.is_empty() {
                    return Err("--hosts needs at least one host".into());
                }
                launch = Launch::Hosts(hosts);
            }
            "--hostfile" => launch = Launch::Hostfile(PathBuf::from(value("a file")?)),
            "--mpirun-arg" => mpirun_args.push(value("an argument")?),
            "--root" => root = value("a rank")?.parse().map_err(|_| "--root needs a rank number".to_string())?,
            "--overwrite" => {
                let v = value("a policy")?;
                policy = Policy::parse(&v).ok_or_else(|| format!("--overwrite {v}: expected never, changed or always"))?;
            }
            "--chunk" => {
                let v = value("a size")?;
                chunk_bytes = parse_size(&v).ok_or_else(|| format!("--chunk {v}: expected a size such as 4M"))?;
            }
            "--fsync" => fsync = true,
            "--progress" => progress = Some(true),
            "--no-progress" => progress = Some(false),
            "-q" | "--quiet" => quiet = true,
            "--" => positional.extend(it.by_ref().cloned()),
            _ if arg.starts_with('-') && arg.len() > 1 => return Err(format!("unknown option {arg}")),
            _ => positional.push(arg.clone()),
        }
    }
    let (src, dst) = match positional.as_slice() {
        [src] => (src.clone(), src.clone()),
        [src, dst] => (src.clone(), dst.clone()),
        [] => return Err("SRC is missing".into()),
        _ => return Err("too many arguments (SRC [DST])".into()),
    };
    Ok(Parsed::Run(Args { launch, mpirun_args, root, policy, chunk_bytes, fsync, progress, quiet, src: PathBuf::from(src), dst }))
}

/// DST with %h, %r and %% replaced.
pub fn expand_destination(pattern: &str, host: &str, rank: i32) -> Result<String, String> {
    let mut out = String::with_capacity(pattern.len());
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('h') => out.push_str(host),
            Some('r') => out.push_str(&rank.to_string()),
            Some('%') => out.push('%'),
            other => return Err(format!("DST {pattern}: unknown %{} (use %h, %r or %%)", other.map(String::from).unwrap_or_default())),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Result<Args, String> {
        match parse(&list.iter().map(|s| s.to_string()).collect::<Vec<_>>())? {
            Parsed::Run(a) => Ok(a),
            Parsed::Help => Err("help".into()),
        }
    }

    #[test]
    fn defaults_and_options() {
        let a = args(&["/data/f"]).unwrap();
        assert_eq!((a.root, a.policy, a.dst.as_str(), a.launch.clone()), (0, Policy::IfDifferent, "/data/f", Launch::Rank));
        let a = args(&["--root", "2", "--overwrite=never", "--chunk", "64K", "-q", "--hosts", "a,b", "s", "d"]).unwrap();
        assert_eq!((a.root, a.policy, a.chunk_bytes, a.quiet), (2, Policy::Never, 65536, true));
        assert_eq!(a.launch, Launch::Hosts(vec!["a".into(), "b".into()]));
        assert_eq!((a.src, a.dst), (PathBuf::from("s"), "d".to_string()));
        assert!(args(&["--overwrite", "maybe", "s"]).is_err());
        assert!(args(&["--bogus", "s"]).is_err());
        assert!(args(&[]).is_err());
        assert!(args(&["a", "b", "c"]).is_err());
        assert!(args(&["--root"]).is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4M"), Some(4 << 20));
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("1G"), Some(1 << 30));
        assert_eq!(parse_size("12X"), None);
        assert_eq!(parse_size("M"), None);
    }

    #[test]
    fn destination_patterns() {
        assert_eq!(expand_destination("/d/%h/r%r/%%x", "node1", 3).unwrap(), "/d/node1/r3/%x");
        assert!(expand_destination("/d/%q", "n", 0).is_err());
        assert!(expand_destination("/d/%", "n", 0).is_err());
    }
}
