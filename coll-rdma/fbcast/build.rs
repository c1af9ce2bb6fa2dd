//! Bindings to the public MPI API only (mpi.h, from the directories
//! `mpicc --showme` names), plus a C file that hands over the predefined
//! handles. Not ompi-sys: that crate needs Open MPI's internal headers and
//! links open-pal, which a library for applications must not require.

use std::env;
use std::path::PathBuf;
use std::process::Command;

/// The directories `mpicc --showme:<what>` names. Deliberately not
/// OMPI_INCLUDE_DIRS (ompi-sys's override for internal headers taken from a
/// source tree): mpi.h is always installed with Open MPI.
fn mpicc_dirs(what: &str) -> Vec<PathBuf> {
    let mpicc = env::var("MPICC").unwrap_or_else(|_| "mpicc".to_string());
    let output = Command::new(&mpicc)
        .arg(format!("--showme:{what}"))
        .output()
        .unwrap_or_else(|e| panic!("cannot run `{mpicc} --showme:{what}` ({e}); install libopenmpi-dev or set MPICC"));
    assert!(output.status.success(), "`{mpicc} --showme:{what}` failed; set MPICC");
    String::from_utf8_lossy(&output.stdout).split_whitespace().map(PathBuf::from).collect()
}

fn main() {
    println!("cargo:rerun-if-env-changed=MPICC");
    for f in ["csrc/mpi_handles.c", "csrc/wrapper.h"] {
        println!("cargo:rerun-if-changed={f}");
    }
    let include_dirs = mpicc_dirs("incdirs");
    let lib_dirs = mpicc_dirs("libdirs");

    let mut handles = cc::Build::new();
    handles.file("csrc/mpi_handles.c").warnings(true);
    for dir in &include_dirs {
        handles.include(dir);
    }
    handles.compile("coll_rdma_fbcast_handles");

    for dir in &lib_dirs {
        println!("cargo:rustc-link-search=native={}", dir.display());
    }
    println!("cargo:rustc-link-lib=dylib=mpi");

    let mut builder = bindgen::Builder::default()
        .header("csrc/wrapper.h")
        .allowlist_function("MPI_(Comm_set_errhandler|Barrier|Bcast|Allreduce|Allgather|Gather|Comm_rank|Comm_size|Init|Finalize|Initialized|Finalized|Abort)")
        .allowlist_function("coll_rdma_fbcast_.*")
        .allowlist_var("MPI_SUCCESS")
        .default_enum_style(bindgen::EnumVariation::Consts)
        .prepend_enum_name(false)
        .layout_tests(false)
        .generate_comments(false);
    for dir in &include_dirs {
        builder = builder.clang_arg(format!("-I{}", dir.display()));
    }
    let bindings = builder.generate().expect("bindgen over mpi.h failed");
    let out = PathBuf::from(env::var("OUT_DIR").unwrap()).join("mpi_bindings.rs");
    bindings.write_to_file(out).expect("write mpi_bindings.rs");
}
