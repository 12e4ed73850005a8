//! What the README and `docs/` promise about the code stays true: the settings tables are the ones
//! `settings::readme_table` and `settings::container_table` make from the declarations
//! (`UPDATE_README=1 cargo test --test docs readme` rewrites them); the README's test command is the one `.ci/run` runs; and every documented command line
//! uses only flags the binary's `--help` lists, and names files, images and paths that exist.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use confgate::settings::{container_table, readme_table};

use crate::common;
use common::{documents, read, root};

const SETTINGS_DOC: &str = "docs/settings.md";
/// The tables made from the declarations: their marker's name, the file declaring them, the table.
fn declared_tables() -> [(&'static str, &'static str, String); 2] {
    [
        (
            "gate settings",
            "crates/core/src/settings/gate.rs",
            readme_table(),
        ),
        (
            "container settings",
            "crates/core/src/settings/container.rs",
            container_table(),
        ),
    ]
}

#[test]
fn the_settings_tables_are_the_declared_ones() {
    let path = root().join(SETTINGS_DOC);
    let mut doc = std::fs::read_to_string(&path).unwrap();
    let mut differ = Vec::new();
    for (name, source, wanted) in declared_tables() {
        let begin = format!(
            "<!-- {name}: made from {source} by `UPDATE_README=1 cargo test --test docs readme` -->\n"
        );
        let end = format!("<!-- end of {name} -->\n");
        let start = doc
            .find(&begin)
            .unwrap_or_else(|| panic!("{SETTINGS_DOC} marks where its {name} table begins"))
            + begin.len();
        let len = doc[start..]
            .find(&end)
            .unwrap_or_else(|| panic!("{SETTINGS_DOC} marks where its {name} table ends"));
        let found = &doc[start..start + len];
        if found != wanted {
            differ.push(format!(
                "{SETTINGS_DOC}'s {name} table differs from the declarations in {source}\n\
                 --- {SETTINGS_DOC}\n{found}--- declared\n{wanted}"
            ));
            doc = format!("{}{wanted}{}", &doc[..start], &doc[start + len..]);
        }
    }
    if differ.is_empty() {
        return;
    }
    if std::env::var_os("UPDATE_README").is_some_and(|v| v == "1") {
        std::fs::write(path, doc).unwrap();
        return;
    }
    panic!(
        "{}\nrewrite them with `UPDATE_README=1 cargo test --test docs readme`",
        differ.join("\n")
    );
}

/// The logical lines of the fenced code blocks of a Markdown text (continuations joined, a leading `$ `
/// prompt dropped), and the inline code spans outside them.
fn snippets(text: &str) -> (Vec<String>, Vec<String>) {
    let (mut blocks, mut spans) = (Vec::new(), Vec::new());
    let mut fenced = false;
    let mut pending = String::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            let line = line.trim();
            if let Some(head) = line.strip_suffix('\\') {
                pending.push_str(head);
                continue;
            }
            pending.push_str(line);
            let whole = std::mem::take(&mut pending);
            blocks.push(whole.strip_prefix("$ ").unwrap_or(&whole).to_owned());
        } else {
            spans.extend(line.split('`').skip(1).step_by(2).map(str::to_owned));
        }
    }
    (blocks, spans)
}

/// A shell line split into commands (at `|`, `&&`, `;` and `&`) and words, quotes removed, a trailing
/// `# comment` dropped. Enough of the shell for documentation.
fn commands(line: &str) -> Vec<Vec<String>> {
    let (mut out, mut words, mut word) = (Vec::new(), Vec::new(), String::new());
    let (mut quote, mut in_word) = (None, false);
    let mut chars = line.chars().peekable();
    let end_word = |words: &mut Vec<String>, word: &mut String, in_word: &mut bool| {
        if *in_word {
            words.push(std::mem::take(word));
            *in_word = false;
        }
    };
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, '#') if !in_word => break,
            (None, ' ' | '\t') => end_word(&mut words, &mut word, &mut in_word),
            (None, '|' | ';' | '&') => {
                if chars.peek() == Some(&c) {
                    chars.next();
                }
                end_word(&mut words, &mut word, &mut in_word);
                out.push(std::mem::take(&mut words));
            }
            (None, c) => {
                word.push(c);
                in_word = true;
            }
        }
    }
    end_word(&mut words, &mut word, &mut in_word);
    out.push(words);
    out.retain(|w| !w.is_empty());
    out
}

const SUBCOMMANDS: [&str; 7] = [
    "run", "wait", "check", "probe", "status", "policy", "inject",
];

/// `confgate SUB --help`, or `None` when this build has no such command.
fn help(sub: &str) -> Option<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_confgate"))
        .args([sub, "--help"])
        .output()
        .unwrap();
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Whether this build has every command (the default features).
const FULL_BUILD: bool = cfg!(all(feature = "api", feature = "policy", feature = "tls"));

/// The path of the binary in the image: what the manifests' exec probes run.
fn image_binary() -> String {
    let dockerfile = read("Dockerfile");
    let entry = dockerfile
        .lines()
        // The last stage is the default target, confgate's image.
        .rev()
        .find_map(|l| l.strip_prefix("ENTRYPOINT [\""))
        .and_then(|l| l.split('"').next())
        .expect("the Dockerfile has an ENTRYPOINT")
        .to_owned();
    let deployment = read("manifests/native-sidecar/deployment.yaml");
    assert!(
        deployment.contains(&format!("- {entry}\n                - probe")),
        "the manifests' exec probes run {entry}, the image's binary"
    );
    entry
}

/// A problem with one documented `confgate` command line, if any.
fn check_confgate(
    words: &[String],
    helps: &mut BTreeMap<String, Option<String>>,
) -> Option<String> {
    let sub = words.get(1)?;
    if !SUBCOMMANDS.contains(&sub.as_str()) {
        return (sub.starts_with('-') && sub != "--help" && sub != "--version")
            .then(|| format!("`{sub}` is not a confgate command or flag"));
    }
    let help = helps.entry(sub.clone()).or_insert_with(|| help(sub));
    let Some(help) = help else {
        return FULL_BUILD.then(|| format!("`confgate {sub} --help` fails"));
    };
    for word in &words[2..] {
        let flag = word.trim_start_matches('[').trim_end_matches(['.', ']']);
        if !flag.starts_with('-') || flag == "-" || flag == "--" {
            continue;
        }
        let flag = flag.split('=').next().unwrap();
        let listed = [" ", ",", "\n"]
            .iter()
            .any(|after| help.contains(&format!(" {flag}{after}")));
        if !listed {
            return Some(format!("`confgate {sub} --help` does not list {flag}"));
        }
    }
    None
}

/// A problem with a path, example, test, target or image a documented command names, if any.
fn check_names(words: &[String]) -> Option<String> {
    let exists = |rel: &str| root().join(rel).exists();
    for (i, word) in words.iter().enumerate() {
        let next = words.get(i + 1).map(String::as_str).unwrap_or("");
        let path = word.trim_end_matches([',', '.', ')', ':']);
        let local = [
            "manifests/",
            ".ci/",
            "examples/",
            "scripts/",
            "docs/",
            "tests/",
            "src/",
            "crates/",
            "fuzz/",
        ]
        .iter()
        .any(|d| path.starts_with(d));
        if local && !path.contains(['*', '<', '>']) && !exists(path) {
            return Some(format!("{path} does not exist"));
        }
        let missing = match (words[0].as_str(), word.as_str()) {
            ("cargo", "--example") => !exists(&format!("examples/{next}.rs")),
            ("cargo", "--test") => {
                !exists(&format!("tests/{next}.rs")) && !exists(&format!("tests/{next}/main.rs"))
            }
            ("cargo", "--bench") => !exists(&format!("benches/{next}.rs")),
            ("docker", "--target") => !read("Dockerfile").contains(&format!(" AS {next}\n")),
            ("kubectl", "-k") | ("kubectl", "kustomize") if next.starts_with("manifests/") => {
                !exists(&format!("{next}/kustomization.yaml"))
            }
            _ => false,
        };
        if missing {
            return Some(format!("{word} {next} names nothing in this repository"));
        }
        if let Some(image) = path.strip_prefix("localhost/confgate/") {
            // `kustomize edit set image OLD=NEW` names the manifests' image on the left; the
            // `-policy` image is the default one's tag with a suffix.
            let image = image.split('=').next().unwrap_or(image);
            let image = image.strip_suffix("-policy").unwrap_or(image);
            let named = read("manifests/native-sidecar/deployment.yaml");
            let bare = |line: &str| {
                line.trim()
                    .strip_prefix("image: localhost/confgate/")
                    .map(str::to_owned)
            };
            if !named
                .lines()
                .filter_map(bare)
                .any(|n| n == image || n.split(':').next() == Some(image))
            {
                return Some(format!(
                    "image localhost/confgate/{image} is not the image the manifests run"
                ));
            }
        }
    }
    None
}

#[test]
fn every_documented_command_line_is_one_the_binary_and_the_repository_accept() {
    let binary = image_binary();
    let mut helps = BTreeMap::new();
    let mut problems = BTreeSet::new();
    let mut checked = 0;
    for path in documents() {
        let text = std::fs::read_to_string(&path).unwrap();
        let name = path.strip_prefix(root()).unwrap().display().to_string();
        let (blocks, spans) = snippets(&text);
        let mut lines: Vec<Vec<Vec<String>>> = blocks.iter().map(|l| commands(l)).collect();
        // Inline code that is a confgate command line.
        lines.extend(
            spans
                .iter()
                .filter(|s| {
                    s.strip_prefix("confgate ")
                        .is_some_and(|r| SUBCOMMANDS.iter().any(|c| r.starts_with(c)))
                })
                .map(|s| commands(s)),
        );
        for words in lines.into_iter().flatten() {
            let words: Vec<String> = match words.iter().position(|w| w == "--") {
                // `kubectl exec POD -c confgate -- /confgate probe ready`: the image has no shell
                // and no PATH, so the binary must be named by its path in the image.
                Some(i) if words[0] == "kubectl" && words.get(1).is_some_and(|w| w == "exec") => {
                    let inner = &words[i + 1..];
                    if inner.first().is_some_and(|w| w != &binary) {
                        problems.insert(format!(
                            "{name}: `{}`: in the image the binary is {binary}",
                            words.join(" ")
                        ));
                    }
                    let mut inner = inner.to_vec();
                    inner[0] = "confgate".into();
                    inner
                }
                _ => words,
            };
            checked += 1;
            let problem = match words[0].as_str() {
                "confgate" => check_confgate(&words, &mut helps),
                _ => None,
            }
            .or_else(|| check_names(&words));
            if let Some(p) = problem {
                problems.insert(format!("{name}: `{}`: {p}", words.join(" ")));
            }
        }
    }
    assert!(checked > 50, "only {checked} command lines found");
    assert!(
        problems.is_empty(),
        "documented command lines the code does not accept:\n{}",
        problems.into_iter().collect::<Vec<_>>().join("\n")
    );
}

#[test]
fn the_readme_test_command_is_the_one_ci_runs() {
    let readme = read("README.md");
    let ci = read(".ci/run");
    // The first code block of the README: the demo, then the tests.
    let block = readme
        .split("```sh\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("the README opens with a code block");
    let line = block
        .lines()
        .find(|l| l.contains("cargo test"))
        .expect("the README's first code block has the test command");
    assert!(
        block
            .lines()
            .next()
            .unwrap()
            .starts_with("cargo run --example demo"),
        "the README's first command is the demo"
    );
    let command = line.split(" #").next().unwrap().trim();
    let (setup, test) = command
        .split_once(" && ")
        .expect("the test command is `SETUP && PATH=… cargo test`");
    let (path, cargo) = test
        .split_once(' ')
        .expect("the tests run with the tools' PATH");
    assert!(
        ci.lines().any(|l| l.trim() == setup),
        ".ci/run runs {setup}, as the README's test command does"
    );
    let dir = path
        .strip_prefix("PATH=")
        .and_then(|p| p.strip_suffix(":$PATH"))
        .expect("PATH=DIR:$PATH");
    assert!(
        ci.contains(&format!("export PATH=\"{dir}:$PATH\"")),
        ".ci/run puts {dir} first on PATH, as the README's test command does"
    );
    assert!(
        ci.lines()
            .any(|l| l.trim().starts_with(&format!("{cargo} 2>&1"))),
        ".ci/run runs `{cargo}`, as the README's test command does"
    );
    // The demo's command too.
    assert!(
        ci.contains("cargo run -q --example demo"),
        ".ci/run runs the demo"
    );
}

/// A log line quoted in the documents names its target as tracing prints it (`confgate::gate::logs`):
/// the module must still be there, and its message still logged from it, so an excerpt cannot name a
/// module the code has left.
#[test]
fn every_quoted_log_line_names_the_module_that_logs_it() {
    let mut quoted = 0;
    for doc in documents() {
        let text = std::fs::read_to_string(&doc).unwrap();
        for line in text.lines() {
            let Some(at) = line.find(" confgate::") else {
                continue;
            };
            let rest = &line[at + 1..];
            let Some((target, after)) = rest.split_once(": ") else {
                continue;
            };
            if !after.starts_with("msg=\"") {
                continue;
            }
            let module = target.trim_start_matches("confgate::").replace("::", "/");
            let src = root().join("src");
            let file = [
                src.join(format!("{module}.rs")),
                src.join(&module).join("mod.rs"),
            ]
            .into_iter()
            .find(|f| f.is_file())
            .unwrap_or_else(|| panic!("{}: {target} is no module: {line}", doc.display()));
            let msg = after["msg=\"".len()..].split('"').next().unwrap();
            assert!(
                std::fs::read_to_string(&file).unwrap().contains(msg),
                "{}: {target} ({}) does not log {msg:?}",
                doc.display(),
                file.display()
            );
            quoted += 1;
        }
    }
    assert!(
        quoted > 0,
        "no quoted log line found: the test reads nothing"
    );
}
