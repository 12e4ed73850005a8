//! [`Pipeline::execute`]: each of the gate's actions carried out, in order, with the event it
//! answers with (reads and writes of the promoted dir on the blocking pool, through `on_dir`).

use tracing::{debug, info, warn};

use super::super::feed::off_loop;
use super::super::known_good::Ask;
use super::super::logs::{self, Places};
use super::super::machine::{Action, AppliedBy, Count, Event, ReloadRequest, RollbackFailure};
use super::{Pipeline, Running, source_kind};
use crate::annotations;
use crate::known_good::{ComponentRead, Entry, Line, Recorded};
use crate::promote::{self, Promoter};
use crate::reload;
use crate::snapshot::ContentHash;
use crate::snapshot::{self, Observed};
use crate::verdict;

impl Pipeline {
    /// Carries out one action; an action that reads or writes returns what it found or did.
    pub(super) async fn execute(&mut self, action: Action) -> Option<Event> {
        match action {
            Action::Adopt { settings } => return self.adopt(*settings).await,
            Action::ReadAnnotations => {
                let file = self.cfg.annotations.clone();
                let read = off_loop(&self.shared, move || annotations::read(&file)).await;
                return Some(Event::Annotations(read));
            }
            Action::Judge {
                settings,
                unless,
                anew,
                bucket,
                refused,
                on_loop,
            } => {
                if let Some(why) = anew {
                    debug!(why = ?why, "the newest config is judged again, whatever it reads as");
                }
                return self
                    .judge(*settings, unless, bucket, refused, on_loop)
                    .await;
            }
            Action::VerifyPromoted => {
                let dir = self.promoter.as_ref()?.dir().to_path_buf();
                let found = off_loop(&self.shared, move || snapshot::read(&dir)).await;
                return Some(Event::Verified(found));
            }
            Action::RejudgeActive { settings } => {
                let kind = source_kind(&self.feed, &self.cfg.watch);
                let dir = self.promoter.as_ref()?.dir().to_path_buf();
                let (on_disk, j) = off_loop(&self.shared, move || {
                    let on_disk = snapshot::read(&dir);
                    let j = verdict::judge_as(&on_disk, &settings, kind);
                    (on_disk, j)
                })
                .await;
                return Some(Event::Rejudged(on_disk, j));
            }
            Action::Switch {
                snapshot,
                owe_reload,
                variant,
                keep_baseline,
                on_loop,
            } => {
                let Some(p) = self.promoter.clone() else {
                    return Some(Event::Switched(Ok(crate::reload::boot_ticks())));
                };
                // Anything but a small config after a small one is written on the blocking pool
                // while the loop answers pings.
                let r = if on_loop {
                    p.switch_variant(&snapshot, owe_reload, variant.as_deref(), keep_baseline)
                } else {
                    off_loop(&self.shared, move || {
                        p.switch_variant(&snapshot, owe_reload, variant.as_deref(), keep_baseline)
                    })
                    .await
                };
                let r = r.map(|s| self.switched = Some(s));
                return Some(Event::Switched(
                    r.map(|()| crate::reload::boot_ticks())
                        .map_err(promote::Failure::new),
                ));
            }
            Action::Validate {
                snapshot,
                check,
                timeout,
            } => {
                let sha = snapshot.hash();
                let promoter = self.promoter.clone()?;
                // Staged, checked and unstaged on the blocking pool while the loop goes on (writing
                // up to 1 MiB and removing the staged dir never hold the loop's thread): the answer
                // comes back as an input (`Pipeline::input`), and a newer snapshot can end it
                // meanwhile (`Action::CancelCheck`).
                let (cancel, inbox) = crate::validate::cancellable();
                let task = tokio::task::spawn_blocking(move || {
                    let checked = match promoter.stage(&snapshot) {
                        Ok(dir) => crate::validate::run(&check, &dir, timeout, inbox),
                        Err(e) => {
                            crate::validate::Checked::NotRun(format!("staging the candidate: {e}"))
                        }
                    };
                    promoter.unstage();
                    checked
                });
                self.check = Some(Running { sha, cancel, task });
            }
            Action::CancelCheck => {
                if let Some(running) = self.check.take() {
                    running.cancel.cancel();
                    // Ended (and unstaged, by the task) before the next candidate is staged in its
                    // place; the loop answers pings meanwhile.
                    let mut task = running.task;
                    loop {
                        tokio::select! {
                            _ = &mut task => break,
                            () = self.shared.pinged() => self.shared.pong(),
                        }
                    }
                }
            }
            Action::JudgeBase { settings } => {
                let kind = source_kind(&self.feed, &self.cfg.watch);
                // The applied config is read back and judged off the loop, like any candidate.
                let (base, j) = self
                    .on_dir(move |p| {
                        let base = p.applied().map(|(obs, _)| obs).unwrap_or_else(|| {
                            Observed::Missing(crate::snapshot::Missing::NoApplied)
                        });
                        let j = verdict::judge_as(&base, &settings, kind);
                        (base, j)
                    })
                    .await?;
                return Some(Event::BaseJudged(base, j));
            }
            Action::RollBack => {
                let r = self.on_dir(Promoter::roll_back).await?;
                return Some(Event::RolledBack(match r {
                    Ok(now) => Ok((now, crate::reload::boot_ticks())),
                    Err(e @ promote::Error::NoApplied { .. }) => {
                        Err(RollbackFailure::NoBase(promote::Failure::new(e)))
                    }
                    Err(e) => Err(RollbackFailure::Failed(promote::Failure::new(e))),
                }));
            }
            Action::AdoptBaseline => {
                if let Some(Err(e)) = self.on_dir(|p| p.adopt_baseline()).await {
                    warn!(error = %e, "the first config's dir could not be kept as the rollback base");
                }
            }
            // Any reload (a promotion's, a rollback's, one owed) is on its way before the loop goes
            // on to publish a status that says it was made, and to its logs and tidying: the worker
            // and the HTTP client's connection task run on this thread.
            Action::Reload(r) => {
                let ReloadRequest {
                    kind,
                    target,
                    confirm,
                    sha,
                    version,
                    promoted_at,
                } = r;
                self.reloads.set_confirm(confirm);
                self.reloads
                    .request_promoted_at(kind, &target, sha, version, promoted_at);
                self.on_its_way().await;
                // The log line after the request is on the wire: the worker runs on this thread,
                // so a line written first (formatting, a write to stderr that a slow log pipe can
                // block) would come between the promotion and the component's reload.
                match kind {
                    reload::Kind::Reload => {
                        info!(reload_target = %target, sha = sha.short(), "reload requested")
                    }
                    reload::Kind::Startup { .. } => {
                        info!(reload_target = %target, sha = sha.short(), "start-up check requested: does the component run the first config?")
                    }
                }
            }
            // The reload just requested is on its way already (`Action::Reload`).
            Action::Yield => {}
            Action::FinishSwitch { on_loop } => {
                if let (Some(p), Some(s)) = (self.promoter.clone(), self.switched.take()) {
                    if on_loop {
                        p.finish(s);
                    } else {
                        off_loop(&self.shared, move || p.finish(s)).await;
                    }
                }
            }
            Action::MarkApplied { sha, version, by } => {
                match self.on_dir(Promoter::mark_applied).await? {
                    Ok(()) => {
                        let (sha, version) = (sha.short(), version.as_deref().unwrap_or(""));
                        match by {
                            AppliedBy::Answer => {
                                info!(sha = %sha, version, "applied by the component: its reload endpoint answered success")
                            }
                            AppliedBy::Metrics => {
                                info!(sha = %sha, version, "applied by the component: its metrics confirmed the reload")
                            }
                            AppliedBy::SignalSent => {
                                info!(sha = %sha, version, "signal delivered; taken as applied, unconfirmed (set confgate.io/confirm to check the component's metrics)")
                            }
                            AppliedBy::Start => {
                                info!(sha = %sha, version, "taken as applied: the component read it at start, nothing to reload")
                            }
                        }
                    }
                    Err(e) => {
                        warn!(error = %e, sha = %sha.short(), "applied, but keeping it for a rollback failed")
                    }
                }
            }
            Action::RecordRejected(entries) => {
                let (sha, _) = *entries.last()?;
                let target = self.gate.settings().reload.clone();
                if let Err(e) = self
                    .on_dir(move |p| p.record_rejected(&target, &entries))
                    .await?
                {
                    warn!(error = %e, sha = %sha.short(), "cannot record the refusals in the promoted dir; a restart would not know them");
                }
            }
            Action::RecordSettings(values) => {
                if let Err(e) = self.on_dir(move |p| p.record_settings(&values)).await? {
                    warn!(error = %e, "cannot record the settings in force in the promoted dir; after a restart a bad annotation would fall back to the flag's value");
                }
            }
            Action::MarkReloadOwed(sha) => {
                if let Err(e) = self.on_dir(move |p| p.mark_reload_owed(sha)).await? {
                    warn!(error = %e, sha = %sha.short(), "cannot record the rollback's reload as owed; a restart would not send it");
                }
            }
            Action::ClearReloadOwed { sha, refused } => {
                if let Err(e) = self.on_dir(move |p| p.clear_reload_owed(sha)).await? {
                    if refused {
                        warn!(error = %e, sha = %sha.short(), "cannot clear the reload-owed marker of refused content");
                    } else {
                        warn!(error = %e, sha = %sha.short(), "cannot clear the reload-owed marker; a restart will reload again");
                    }
                }
            }
            Action::Tidy => {
                let tidied = self
                    .on_dir(|p| p.needs_tidy().then(|| p.tidy()).transpose())
                    .await?;
                if let (Err(e), Some(p)) = (tidied, &self.promoter) {
                    warn!(error = %e, dir = %p.dir().display(), "tidying the promoted dir failed; will retry");
                }
            }
            Action::ReadComponent => {
                let Some(link) = &self.known_good else {
                    return Some(Event::Component(ComponentRead::Unavailable(
                        "no Kubernetes client for the pod (no credentials, no POD_NAME/POD_NAMESPACE, or --pod-report off)".into(),
                    )));
                };
                if link.asks.send(Ask::Component).is_err() {
                    return Some(Event::Component(ComponentRead::Unavailable(
                        "the known-good task has stopped".into(),
                    )));
                }
            }
            Action::ReadKnownGood => {
                let sent = self
                    .known_good
                    .as_ref()
                    .is_some_and(|l| l.asks.send(Ask::Read).is_ok());
                if !sent {
                    return Some(Event::KnownGoodRead(Err(
                        "no Kubernetes client for the record (no credentials, no POD_NAME/POD_NAMESPACE, or --pod-report off)".into(),
                    )));
                }
            }
            Action::JudgeKnownGood { settings, configs } => {
                // Judged off the loop, like any candidate: content rules may cost.
                let judged = off_loop(&self.shared, move || {
                    configs
                        .into_iter()
                        .map(|s| {
                            let j = verdict::judge(&Observed::Config(s.clone()), &settings);
                            (s, j)
                        })
                        .collect()
                })
                .await;
                return Some(Event::KnownGoodJudged(judged));
            }
            Action::RecordKnownGood {
                sha,
                version,
                parsed,
            } => return self.record_known_good(sha, version, parsed).await,
            Action::Count(c) => {
                let m = &self.shared.metrics;
                match c {
                    Count::Candidate(v) => m.candidate(v),
                    Count::Promoted(at) => m.promoted(at.as_millisecond() as f64 / 1000.0),
                    Count::PromotionFailed => m.promotion_failed(),
                    Count::Repaired => m.repaired(),
                    Count::WatchErrors(n) => {
                        (0..n).for_each(|_| m.watch_error(crate::metrics::WatchSource::Files))
                    }
                }
            }
            Action::Notice(n) => self.publisher.notice(n),
            Action::Log(note) => logs::log(
                &note,
                &Places {
                    annotations: &self.cfg.annotations,
                    watch: &self.cfg.watch,
                    promoted: self.promoter.as_deref().map(Promoter::dir),
                },
            ),
        }
        None
    }

    /// Reads the applied config back from its kept dir and hands it to the known-good edge to record;
    /// answers at once only when it cannot be sent.
    async fn record_known_good(
        &mut self,
        sha: ContentHash,
        version: String,
        parsed: crate::values::SchemeVersion,
    ) -> Option<Event> {
        let failed = |why: String| Some(Event::Recorded(Recorded::Failed(why)));
        let applied = self
            .on_dir(|p| p.applied().map(|(obs, _)| obs))
            .await
            .flatten();
        let snap = match applied {
            Some(Observed::Config(s)) if s.hash() == sha => s,
            _ => return failed("the applied config's kept dir no longer holds it".into()),
        };
        let Some(link) = &self.known_good else {
            return failed("no Kubernetes client".into());
        };
        let Some(line) = Line::of(&parsed) else {
            return failed("a config of several files has no one version line to record".into());
        };
        let ask = Ask::Record {
            line,
            parsed,
            entry: Entry::of(&snap, &version),
        };
        if link.asks.send(ask).is_err() {
            return failed("the known-good task has stopped".into());
        }
        None
    }
}
