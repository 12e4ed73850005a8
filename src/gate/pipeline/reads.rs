//! What the pipeline reads and judges for the gate: what a previous run left in the promoted dir
//! (at start-up), and the newest config (on the loop when small after a small one, otherwise on the
//! blocking pool).

use tokio::time::Instant;
use tracing::{info, warn};

use super::super::feed::{Feed, off_loop};
use super::super::machine::{Event, Found, SMALL_BYTES, SMALL_KEYS, Seen, held_refusals, is_small};
use super::{Pipeline, SETTLE, source_kind};
use crate::reload::Refusal;
use crate::rollout::{self, Bucket};
use crate::settings::Settings;
use crate::snapshot;
use crate::snapshot::ContentHash;
use crate::verdict;

impl Pipeline {
    /// What a previous run left in the promoted dir, read and judged off the loop.
    pub(super) async fn adopt(&mut self, settings: Settings) -> Option<Event> {
        let on_disk = self.found.take()?;
        let p = self.promoter.clone()?;
        let reload = settings.reload.clone();
        let kind = source_kind(&self.feed, &self.cfg.watch);
        let (on_disk, judgement, (refused, owed, variants), applied) =
            off_loop(&self.shared, move || {
                let judgement = verdict::judge_as(&on_disk, &settings, kind);
                // What the component did before the restart: what it refused is not offered again, and
                // what it applied is the rollback base again.
                let applied = p.applied().map(|(applied, since)| {
                    let j = verdict::judge_as(&applied, &settings, kind);
                    (applied, j, since)
                });
                let record = (p.rejected(), p.reload_owed(), p.variants());
                (on_disk, judgement, record, applied)
            })
            .await;
        let dir = self.promoter.as_ref()?.dir();
        if let Some(h) = on_disk.hash() {
            info!(dir = %dir.display(), sha = %h.short(), "promoted dir already holds a config");
        }
        if let Some(why) = &refused.ignored {
            warn!(problem = %why, "the record of contents the component refused is damaged; ignoring what cannot be read");
        }
        let recorded = refused.entries.len();
        let entries = held_refusals(&refused.target, refused.entries, &reload);
        if entries.len() < recorded {
            info!(
                count = recorded - entries.len(),
                "refusals recorded under another reload target, or answers that said the target was wrong, are not held against those contents"
            );
        }
        if !entries.is_empty() {
            info!(
                count = entries.len(),
                "contents the component refused before the restart are not offered again"
            );
        }
        Some(Event::Adopted(Box::new(Found {
            on_disk,
            judgement,
            refused: entries,
            applied,
            owed,
            variants,
        })))
    }

    /// Reads the newest snapshot (the volume, or the feed's) and judges it, unless it is what was last
    /// judged. With `on_loop` (the last config was small, [`is_small`]) the next is read, and when
    /// small again judged, on the loop itself: two thread hand-offs fewer between the `..data` swap
    /// and the reload, which is most of the reaction time on a busy node. Otherwise, and whenever
    /// content rules are in force, the work runs off the loop ([`off_loop`]), so that a large config
    /// cannot hold up `/livez`.
    pub(super) async fn judge(
        &mut self,
        settings: Settings,
        unless: Option<Seen>,
        bucket: Option<Bucket>,
        refused: Vec<(ContentHash, Refusal)>,
        on_loop: bool,
    ) -> Option<Event> {
        // The rollout shows a refused candidate's reason: the refusals, worded.
        let refused: Vec<(ContentHash, String)> = refused
            .into_iter()
            .map(|(h, r)| (h, r.to_string()))
            .collect();
        // One look at `..data` tells the kind of source, and whether the settling check applies.
        let kind = source_kind(&self.feed, &self.cfg.watch);
        let fed = match &self.feed {
            // Half-written, maybe: the read waits for the close.
            Feed::Volume if self.writing => return None,
            Feed::Volume if kind == verdict::fix::Source::PlainDir => {
                if let Some(wait) = snapshot::settling(&self.cfg.watch, SETTLE) {
                    self.settling = Some(Instant::now() + wait);
                    return None;
                }
                None
            }
            Feed::Volume => None,
            Feed::Channel { snapshots, .. } => Some(snapshots.borrow().clone()?),
        };
        let watch = self.cfg.watch.clone();
        // After a small config the next is read on the loop when it is small too: the read stops
        // at the first entry or byte past the bounds, and a 1 MiB config after a small one is then
        // read off the loop, like any large one.
        let (here, fed) = match fed {
            Some(obs) if on_loop => (Some(obs), None),
            None if on_loop => (
                snapshot::read_small(&watch, SMALL_KEYS, SMALL_BYTES as u64),
                None,
            ),
            fed => (None, fed),
        };
        let read = move || fed.unwrap_or_else(|| snapshot::read(&watch));
        let rules = !settings.rules.is_empty();
        let (seen, small, choice) = if let Some(obs) = here {
            let (seen, small) = (Seen::of(&obs), is_small(&obs));
            if unless.as_ref() == Some(&seen) {
                (seen, small, None)
            } else if small && !rules {
                let choice = rollout::choose_as(obs, &settings, bucket, &refused, kind);
                (seen, small, Some(choice))
            } else {
                let choice = off_loop(&self.shared, move || {
                    rollout::choose_as(obs, &settings, bucket, &refused, kind)
                })
                .await;
                (seen, small, Some(choice))
            }
        } else {
            off_loop(&self.shared, move || {
                let obs = read();
                let (seen, small) = (Seen::of(&obs), is_small(&obs));
                // Identical input under unchanged settings: nothing to judge.
                if unless.as_ref() == Some(&seen) {
                    return (seen, small, None);
                }
                let choice = rollout::choose_as(obs, &settings, bucket, &refused, kind);
                (seen, small, Some(choice))
            })
            .await
        };
        let (choice, rollout) = choice.unzip();
        Some(Event::Judged {
            seen,
            choice: choice.map(Box::new),
            rollout: rollout.flatten(),
            small,
        })
    }
}
