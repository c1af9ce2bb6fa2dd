//! Generates bindings from the installed Open MPI's internal headers and
//! compiles the C shim. Directories come from `mpicc --showme`, or from
//! OMPI_INCLUDE_DIRS / OMPI_LIB_DIRS (colon-separated) when set
//! (`make build OMPI_SOURCE=...` sets OMPI_INCLUDE_DIRS to a configured
//! Open MPI source tree's directories: ompi-patches/README.md).

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn dirs_from(var: &str, showme: &str) -> Vec<PathBuf> {
    println!("cargo:rerun-if-env-changed={var}");
    if let Ok(list) = env::var(var) {
        return env::split_paths(&list).collect();
    }
    let mpicc = env::var("MPICC").unwrap_or_else(|_| "mpicc".to_string());
    let output = Command::new(&mpicc)
        .arg(format!("--showme:{showme}"))
        .output()
        .unwrap_or_else(|e| panic!("cannot run `{mpicc} --showme:{showme}` ({e}); install libopenmpi-dev or set {var}"));
    assert!(output.status.success(), "`{mpicc} --showme:{showme}` failed; set {var}");
    String::from_utf8_lossy(&output.stdout).split_whitespace().map(PathBuf::from).collect()
}

/// The `OMPI_*_VERSION` numbers of the headers, so that the component can
/// refuse to run inside a different Open MPI.
fn header_version(include_dirs: &[PathBuf]) -> String {
    let header = include_dirs
        .iter()
        .map(|d| d.join("ompi/version.h"))
        .find(|p| p.exists())
        .expect(
            "ompi/version.h not found: Open MPI's internal headers are missing (Debian: libopenmpi-dev); \
             for an Open MPI installed without them, build against its configured source tree: \
             make build OMPI_SOURCE=/path/to/openmpi-X.Y.Z (ompi-patches/README.md)",
        );
    println!("cargo:rerun-if-changed={}", header.display());
    let text = std::fs::read_to_string(&header).expect("read ompi/version.h");
    let number = |name: &str| -> String {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("#define {name} ")).map(|v| v.trim().to_string()))
            .unwrap_or_else(|| panic!("{name} missing from {}", header.display()))
    };
    format!("{}.{}.{}", number("OMPI_MAJOR_VERSION"), number("OMPI_MINOR_VERSION"), number("OMPI_RELEASE_VERSION"))
}

/// The `x.y.z` of the coll framework's `MCA_COLL_BASE_VERSION_x_y_z` macro
/// (2.0.0 in Open MPI 4.1, 2.4.0 in 5.0): the type version our component
/// must announce.
fn coll_type_version(include_dirs: &[PathBuf]) -> [u32; 3] {
    let header = include_dirs
        .iter()
        .map(|d| d.join("ompi/mca/coll/coll.h"))
        .find(|p| p.exists())
        .expect("ompi/mca/coll/coll.h not found among Open MPI's include directories");
    let text = std::fs::read_to_string(&header).expect("read ompi/mca/coll/coll.h");
    let suffix = text
        .lines()
        .find_map(|l| l.strip_prefix("#define MCA_COLL_BASE_VERSION_"))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no MCA_COLL_BASE_VERSION_x_y_z macro in {}", header.display()));
    let numbers: Vec<u32> = suffix.split('_').map(|n| n.parse().expect("numeric coll type version")).collect();
    numbers.try_into().unwrap_or_else(|_| panic!("unexpected MCA_COLL_BASE_VERSION_{suffix}"))
}

/// Open MPI 5's internal headers include <pmix.h>, which Debian installs in
/// a directory `mpicc --showme` does not name; pkg-config knows it.
fn pmix_include_dirs() -> Vec<PathBuf> {
    let Ok(output) = Command::new("pkg-config").args(["--cflags-only-I", "pmix"]).output() else {
        return Vec::new();
    };
    String::from_utf8_lossy(&output.stdout)
        .split_whitespace()
        .filter_map(|flag| flag.strip_prefix("-I"))
        .map(PathBuf::from)
        .collect()
}

fn main() {
    let mut include_dirs = dirs_from("OMPI_INCLUDE_DIRS", "incdirs");
    // Headers a distribution's package omits (Debian's 5.0 lacks
    // opal/mca/threads/pthreads/*.h), from wherever the builder has them.
    println!("cargo:rerun-if-env-changed=OMPI_EXTRA_INCLUDE_DIRS");
    if let Ok(list) = env::var("OMPI_EXTRA_INCLUDE_DIRS") {
        include_dirs.extend(env::split_paths(&list));
    }
    let lib_dirs = dirs_from("OMPI_LIB_DIRS", "libdirs");
    let csrc = Path::new("csrc");
    for f in ["wrapper.h", "shim.h", "shim.c", "coll_framework.c", "compat/ompi/mpi/fortran/base/fint_2_int.h"] {
        println!("cargo:rerun-if-changed=csrc/{f}");
    }

    let version = header_version(&include_dirs);
    println!("cargo:rustc-env=OMPI_SYS_BUILT_VERSION={version}");
    if !version.starts_with("4.") && env::var_os("OMPI_INCLUDE_DIRS").is_none() {
        include_dirs.extend(pmix_include_dirs());
    }
    let [major, minor, release] = coll_type_version(&include_dirs);
    println!("cargo:rustc-env=OMPI_SYS_COLL_TYPE_MAJOR={major}");
    println!("cargo:rustc-env=OMPI_SYS_COLL_TYPE_MINOR={minor}");
    println!("cargo:rustc-env=OMPI_SYS_COLL_TYPE_RELEASE={release}");

    let mut shim = cc::Build::new();
    shim.file(csrc.join("shim.c")).file(csrc.join("coll_framework.c")).include(csrc).include(csrc.join("compat")).warnings(true);
    for dir in &include_dirs {
        shim.include(dir);
    }
    shim.compile("coll_rdma_shim");

    for dir in &lib_dirs {
        println!("cargo:rustc-link-search=native={}", dir.display());
    }
    println!("cargo:rustc-link-lib=dylib=mpi");
    println!("cargo:rustc-link-lib=dylib=open-pal");

    let mut builder = bindgen::Builder::default()
        .header(csrc.join("wrapper.h").to_string_lossy())
        .clang_arg(format!("-I{}", csrc.display()))
        // coll_base_util.h includes ompi/op/op.h, which needs fint_2_int.h
        .clang_arg(format!("-I{}", csrc.join("compat").display()))
        .allowlist_type("mca_coll_base_.*")
        .allowlist_type("mca_base_component_.*")
        .allowlist_type("ompi_communicator_t")
        .allowlist_type("ompi_datatype_t")
        .allowlist_type("ompi_op_t")
        .allowlist_type("opal_class_t")
        .allowlist_type("opal_object_t")
        .allowlist_type("ompi_request_t")
        .allowlist_type("ompi_coll_base_nbc_request_t")
        .allowlist_function("mca_base_component_var_register")
        .allowlist_function("mca_base_var_.*")
        .allowlist_function("opal_output_open")
        .allowlist_function("opal_output_close")
        .allowlist_function("opal_progress_register")
        .allowlist_function("opal_progress")
        .allowlist_function("opal_progress_unregister")
        .allowlist_function("coll_rdma_shim_.*")
        .allowlist_type("coll_rdma_shim_.*")
        .allowlist_function("MPI_Abort")
        .allowlist_function("MPI_Get_library_version")
        .allowlist_function("MPI_Pack")
        .allowlist_function("MPI_Unpack")
        .allowlist_var("mca_coll_base_module_t_class")
        .allowlist_var("ompi_communicator_t_class")
        .allowlist_var("ompi_request_t_class")
        .allowlist_var("ompi_coll_base_nbc_request_t_class")
        .allowlist_var("MCA_BASE_VAR_.*")
        .allowlist_var("OPAL_INFO_LVL_.*")
        .allowlist_var("OMPI_SUCCESS")
        .allowlist_var("OMPI_ERROR")
        .allowlist_var("OMPI_ERR_.*")
        .allowlist_var("MPI_ERR_OTHER")
        .allowlist_var("MPI_ERR_REQUEST")
        .allowlist_var("MPI_SUCCESS")
        .allowlist_var("OPAL_SUCCESS")
        .allowlist_var("MCA_BASE_.*")
        .allowlist_var("OMPI_MAJOR_VERSION")
        .allowlist_var("OMPI_MINOR_VERSION")
        .allowlist_var("OMPI_RELEASE_VERSION")
        .allowlist_var("MPI_MAX_LIBRARY_VERSION_STRING")
        .allowlist_var("MPI_MAX_OBJECT_NAME")
        .allowlist_var("MCA_COLL_BASE_.*")
        .allowlist_var("MPI_IN_PLACE_ADDRESS")
        .allowlist_var("MPI_THREAD_.*")
        .default_enum_style(bindgen::EnumVariation::Consts)
        .prepend_enum_name(false)
        .derive_default(true)
        .layout_tests(true)
        .generate_comments(false);
    for dir in &include_dirs {
        builder = builder.clang_arg(format!("-I{}", dir.display()));
    }
    let bindings = builder.generate().expect("bindgen over Open MPI's headers failed");
    let out = PathBuf::from(env::var("OUT_DIR").unwrap()).join("bindings.rs");
    bindings.write_to_file(out).expect("write bindings.rs");
}
