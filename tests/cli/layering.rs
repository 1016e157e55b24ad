//! The layering of docs/design.md, enforced: the pure core builds without the async,
//! Docker, MCP and HTTP crates; Docker appears only in the Docker sandbox backend, the MCP
//! SDK only in the tool host, the HTTP client only there and in the model providers' HTTP
//! module; and no two top-level modules of a crate import each other (directly or through
//! others).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use elengtis_tests::workspace;

/// Source files under `dir`, recursively.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("failed to list sources").flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(sources(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out
}

/// A file's code lines: comments and the `#[cfg(test)]` module at the end left out.
fn code(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).expect("failed to read a source file");
    let text = text.split("#[cfg(test)]\nmod ").next().unwrap_or_default();
    text.lines().map(str::trim).filter(|l| !l.starts_with("//")).map(str::to_owned).collect()
}

/// Top-level module → the top-level modules it names through `crate::`.
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in sources(src) {
        let rel = file.strip_prefix(src).expect("under src");
        let top = rel.components().next().and_then(|c| c.as_os_str().to_str()).unwrap_or_default();
        let top = top.trim_end_matches(".rs").to_owned();
        if matches!(top.as_str(), "lib" | "main" | "bin") {
            continue;
        }
        for line in code(&file) {
            for (i, _) in line.match_indices("crate::") {
                let name: String =
                    line[i + 7..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                if !name.is_empty() && name != top {
                    graph.entry(top.clone()).or_default().insert(name);
                }
            }
        }
        graph.entry(top).or_default();
    }
    graph
}

/// A cycle in the graph, if there is one.
fn cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut found = path[at..].to_vec();
            found.push(node.to_owned());
            return Some(found);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(found) = visit(next, graph, path, done) {
                return Some(found);
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    graph.keys().find_map(|node| visit(node, graph, &mut Vec::new(), &mut done))
}

#[test]
fn no_top_level_module_imports_itself_through_others() {
    for krate in ["core/src", "orchestrator/src"] {
        let graph = module_graph(&workspace().join(krate));
        assert!(graph.len() > 5, "{krate}: {graph:?}");
        assert_eq!(cycle(&graph), None, "{krate}: import cycle between modules; graph: {graph:#?}");
    }
}

#[test]
fn the_cycle_check_finds_a_cycle() {
    let graph = BTreeMap::from([
        ("a".to_owned(), BTreeSet::from(["b".to_owned()])),
        ("b".to_owned(), BTreeSet::from(["c".to_owned()])),
        ("c".to_owned(), BTreeSet::from(["a".to_owned()])),
    ]);
    assert_eq!(cycle(&graph), Some(vec!["a".into(), "b".into(), "c".into(), "a".into()]));
}

#[test]
fn docker_and_the_mcp_sdk_stay_in_their_layers() {
    let src = workspace().join("orchestrator/src");
    let layers: [(&str, &[&str]); 3] = [
        ("bollard::", &["sandbox/docker/"]),
        ("rmcp::", &["toolhost/"]),
        // The MCP client's HTTP, and model providers' HTTP (one module).
        ("reqwest::", &["toolhost/", "model/http.rs"]),
    ];
    for (krate, allowed) in layers {
        for file in sources(&src) {
            let rel = file.strip_prefix(&src).expect("under src").to_string_lossy().into_owned();
            if allowed.iter().any(|a| rel.starts_with(a)) {
                continue;
            }
            let uses: Vec<String> = code(&file).into_iter().filter(|l| l.contains(krate)).collect();
            assert!(uses.is_empty(), "{rel} uses {krate} outside {allowed:?}: {uses:?}");
        }
    }
}

#[test]
fn the_core_builds_without_async_docker_mcp_or_http_crates() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(workspace())
        .args(["tree", "--offline", "-p", "elengtis-core", "-e", "normal", "--prefix", "none"])
        .output()
        .expect("failed to run cargo tree");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let tree = String::from_utf8_lossy(&out.stdout);
    let crates: BTreeSet<&str> = tree.lines().filter_map(|l| l.split_whitespace().next()).collect();
    assert!(crates.contains("serde"), "{crates:?}");
    for forbidden in ["tokio", "bollard", "rmcp", "reqwest", "hyper", "futures-util"] {
        assert!(!crates.contains(forbidden), "elengtis-core depends on {forbidden}: {crates:?}");
    }
}
