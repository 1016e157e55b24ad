//! `images build --binaries DIR`: importing the bundled images from executables already built.
//! A wrong directory is refused before the engine is asked anything, naming the executable.

use elengtis_tests::{elengtis, scratch, stderr};

const BUNDLED: [&str; 7] = elengtis_tests::BUNDLED_EXECUTABLES;

#[test]
fn images_build_from_binaries_names_the_missing_executable() {
    let dir = scratch();
    let out = elengtis(dir.path(), &["images", "build", "--binaries", dir.path().to_str().expect("UTF-8")]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains(&format!("`{}` is missing", dir.path().join("elengtis").display())), "{err}");
    assert!(err.contains("package `elengtis` provides it"), "{err}");
}

#[test]
fn images_build_from_binaries_refuses_a_dynamically_linked_executable() {
    let dir = scratch();
    // A dynamically linked executable of this machine under every bundled name.
    for name in BUNDLED {
        std::fs::copy("/bin/true", dir.path().join(name)).expect("test setup");
    }
    let out = elengtis(dir.path(), &["images", "build", "--binaries", dir.path().to_str().expect("UTF-8")]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("is dynamically linked (it has an ELF interpreter)"), "{err}");
    assert!(err.contains("crt-static"), "{err}");
}
