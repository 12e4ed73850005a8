//! The README's table of gate settings is the one `settings::readme_table` makes from the declarations;
//! `UPDATE_README=1 cargo test --test readme` rewrites it.

use confgate::settings::readme_table;

const BEGIN: &str = "<!-- gate settings: made from src/settings/mod.rs by `UPDATE_README=1 cargo test --test readme` -->\n";
const END: &str = "<!-- end of gate settings -->\n";

#[test]
fn the_readme_settings_table_is_the_declared_one() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/README.md");
    let readme = std::fs::read_to_string(path).unwrap();
    let start = readme
        .find(BEGIN)
        .expect("the README marks where its table begins")
        + BEGIN.len();
    let len = readme[start..]
        .find(END)
        .expect("the README marks where its table ends");
    let (found, wanted) = (&readme[start..start + len], readme_table());
    if found == wanted {
        return;
    }
    if std::env::var_os("UPDATE_README").is_some_and(|v| v == "1") {
        let updated = format!("{}{wanted}{}", &readme[..start], &readme[start + len..]);
        std::fs::write(path, updated).unwrap();
        return;
    }
    panic!(
        "README.md's settings table differs from the declarations in src/settings/mod.rs; \
         rewrite it with `UPDATE_README=1 cargo test --test readme`\n\
         --- README.md\n{found}--- declared\n{wanted}"
    );
}
