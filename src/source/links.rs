//! The symlinks met resolving the config path, as the kernel resolves it: each one's dir is watched
//! for that one name, since a link moved over it points the path elsewhere.

use super::*;

/// As many links as the kernel follows resolving one path (`MAXSYMLINKS`).
const MAX_LINKS: usize = 40;

/// Every symlink met resolving `path` as the kernel does, component by component (a link's target
/// resolved in its turn): the dir holding the link and its name there. Stops where a component does not
/// exist, and after [`MAX_LINKS`] links.
pub(super) fn links_along(path: &Path) -> Vec<(PathBuf, OsString)> {
    /// Puts the components of `p` before those left, starting again at `/` for an absolute `p`.
    fn prepend(p: &Path, todo: &mut VecDeque<OsString>, at: &mut PathBuf) {
        let mut parts = Vec::new();
        for c in p.components() {
            match c {
                Component::RootDir => {
                    parts.clear();
                    *at = PathBuf::from("/");
                }
                Component::Prefix(_) | Component::CurDir => {}
                Component::ParentDir | Component::Normal(_) => {
                    parts.push(c.as_os_str().to_os_string());
                }
            }
        }
        for part in parts.into_iter().rev() {
            todo.push_front(part);
        }
    }
    let mut todo: VecDeque<OsString> = VecDeque::new();
    let mut at = PathBuf::new();
    prepend(path, &mut todo, &mut at);
    let mut out: Vec<(PathBuf, OsString)> = Vec::new();
    while let Some(part) = todo.pop_front() {
        if part == ".." {
            // `at` holds no link: its parent is found by dropping its last name.
            if at.as_os_str().is_empty() || at.ends_with("..") {
                at.push("..");
            } else {
                at.pop();
            }
            continue;
        }
        let next = at.join(&part);
        let Ok(meta) = std::fs::symlink_metadata(&next) else {
            break;
        };
        if !meta.is_symlink() {
            at = next;
            continue;
        }
        if out.len() == MAX_LINKS {
            break;
        }
        let dir = if at.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            at.clone()
        };
        let Ok(target) = std::fs::read_link(&next) else {
            break;
        };
        out.push((dir, part));
        prepend(&target, &mut todo, &mut at);
    }
    out.dedup();
    out
}
