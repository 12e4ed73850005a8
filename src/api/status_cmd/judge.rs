//! Whether each pod of a [`Fleet`] runs what it should, and the first refusal among them.

use super::{Fleet, Row};
use crate::api::condition::Reason;
use crate::state::Track;

impl Fleet {
    /// Whether a pod runs what it should: both conditions are True (a sidecar that writes only
    /// `config-compatible` is judged by it alone), the component applied the promoted config (when the
    /// sidecar knows what it applied) and, with `--configmap`, that config is the ConfigMap's current
    /// content.
    pub fn matches(&self, r: &Row) -> bool {
        let compatible = matches!(r.condition, Some((true, _)))
            && !matches!(r.current, Some((false, _)))
            && !Self::not_applied(r);
        let expected = match (&self.tracks, &r.rollout) {
            (Some(t), Some(part)) => Some(match part.assigned {
                Track::Candidate => t.candidate,
                Track::Stable => t.stable,
            }),
            // The pod has not seen the rollout yet (or its confgate does not know rollouts).
            (Some(_), None) => return false,
            (None, _) => self.configmap.as_ref().and_then(|(_, h)| *h),
        };
        let sha_ok = match (&self.configmap, expected) {
            (Some((_, None)), _) => false,
            (None, _) | (_, None) => true,
            (Some(_), Some(h)) => r.sha256.as_deref() == Some(&h.to_string()),
        };
        compatible && sha_ok && self.refusal(r).is_none()
    }

    /// The content the ConfigMap assigns a pod, with `--configmap`: its track's set mid-rollout.
    fn assigned(&self, r: &Row) -> Option<String> {
        let (_, hash) = self.configmap.as_ref()?;
        let h = match (&self.tracks, r.rollout.as_ref().map(|p| p.assigned)) {
            (Some(t), Some(Track::Candidate)) => t.candidate,
            (Some(t), _) => t.stable,
            (None, _) => (*hash)?,
        };
        Some(h.to_string())
    }

    /// Why a pod will not run what it is assigned without a change: it holds its rollout's
    /// candidate back (outside its range, or refused by the component), or holds back the newest
    /// config for a verdict (too-new, rejected-by-component...). With `--configmap`, only a refusal
    /// of the ConfigMap's current content counts: a condition not yet updated after an edit is no
    /// refusal.
    fn refusal(&self, r: &Row) -> Option<String> {
        let current = |sha: Option<&String>| match self.assigned(r) {
            Some(want) => sha == Some(&want),
            None => true,
        };
        if let Some((c, v)) = r
            .rollout
            .as_ref()
            .and_then(|p| p.held.as_ref())
            .map(|h| (&h.config, h.verdict))
        {
            return current(c.sha256.as_ref())
                .then(|| format!("pod {} holds the candidate {c}: {v}", r.pod));
        }
        if r.held.is_none() || !current(r.held_sha256.as_ref()) {
            return None;
        }
        match &r.current {
            Some((false, reason)) => {
                match reason.parse::<Reason>() {
                    Ok(Reason::Verdict(v)) if v != crate::verdict::Verdict::Accepted => Some(
                        format!("pod {} holds back the newest config: {}", r.pod, v.as_str()),
                    ),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// The first refusal among the pods, in pod order.
    pub(crate) fn first_refusal(&self) -> Option<String> {
        self.rows.iter().find_map(|r| self.refusal(r))
    }

    /// The sidecar knows what the component runs, and it is not the promoted config.
    pub(super) fn not_applied(r: &Row) -> bool {
        r.applied
            .as_ref()
            .is_some_and(|(_, sha)| sha.is_some() && *sha != r.sha256)
    }

    pub fn all_match(&self) -> bool {
        !self.rows.is_empty() && self.rows.iter().all(|r| self.matches(r))
    }
}
