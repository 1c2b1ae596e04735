//! Who may read `/metrics` (`--metrics-auth`, on in the cluster): the caller's
//! bearer token is authenticated with a TokenReview and its user authorised
//! with a SubjectAccessReview for `get` on the non-resource URL `/metrics`,
//! as the kubebuilder scaffold's metrics filter does. Bind the
//! metrics-reader ClusterRole to a scraper to let it in. Verdicts are cached
//! per token for a short while, so a scrape every few seconds costs no
//! review after the first.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, StatusCode, header};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec, UserInfo};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use tracing::warn;

use super::error::{Error, Result};
use crate::error::FromApi;
use crate::rbac::{METRICS_PATH, METRICS_VERB};

/// The answer to one scrape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Allowed,
    /// No token, or one the apiserver does not accept.
    Unauthenticated,
    /// A valid token whose user may not `get` `/metrics`.
    Forbidden,
}

impl Verdict {
    pub fn status(self) -> StatusCode {
        match self {
            Verdict::Allowed => StatusCode::OK,
            Verdict::Unauthenticated => StatusCode::UNAUTHORIZED,
            Verdict::Forbidden => StatusCode::FORBIDDEN,
        }
    }

    /// How long a verdict is reused: an allowed scraper for a minute, a
    /// refused one briefly, so a fresh RoleBinding takes effect soon.
    fn ttl(self) -> Duration {
        match self {
            Verdict::Allowed => Duration::from_secs(60),
            _ => Duration::from_secs(10),
        }
    }
}

/// Pure: the token of an `Authorization: Bearer <token>` header.
pub fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Pure: the review asking whether `user` may `get` `/metrics`.
pub fn access_review(user: &UserInfo) -> SubjectAccessReview {
    SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: user.username.clone(),
            groups: user.groups.clone(),
            uid: user.uid.clone(),
            extra: user.extra.clone(),
            non_resource_attributes: Some(NonResourceAttributes {
                path: Some(METRICS_PATH.into()),
                verb: Some(METRICS_VERB.into()),
            }),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// Tokens remembered at most; beyond it, expired verdicts go, then all.
const CACHE_LIMIT: usize = 1024;

/// Checks scrapers against the apiserver, with a verdict cache.
#[derive(Clone)]
pub struct MetricsAuth {
    client: kube::Client,
    cache: Arc<Mutex<HashMap<String, (Verdict, Instant)>>>,
}

impl MetricsAuth {
    pub fn new(client: kube::Client) -> Self {
        MetricsAuth { client, cache: Arc::default() }
    }

    /// The verdict for a request's headers. Err when the apiserver could
    /// not answer (the scrape gets a 500, and nothing is cached).
    pub async fn check(&self, headers: &HeaderMap) -> Result<Verdict> {
        let Some(token) = bearer_token(headers) else {
            return Ok(Verdict::Unauthenticated);
        };
        let now = Instant::now();
        if let Some((verdict, until)) = self.cache.lock().expect("cache lock").get(token)
            && *until > now
        {
            return Ok(*verdict);
        }
        let verdict = self.review(token).await?;
        let mut cache = self.cache.lock().expect("cache lock");
        if cache.len() >= CACHE_LIMIT {
            cache.retain(|_, (_, until)| *until > now);
            if cache.len() >= CACHE_LIMIT {
                cache.clear();
            }
        }
        cache.insert(token.to_string(), (verdict, now + verdict.ttl()));
        Ok(verdict)
    }

    async fn review(&self, token: &str) -> Result<Verdict> {
        let tokens: Api<TokenReview> = Api::all(self.client.clone());
        let review = TokenReview {
            spec: TokenReviewSpec { token: token.into(), ..Default::default() },
            ..Default::default()
        };
        let reviewed = tokens
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| Error::api("create", "TokenReview", "", "", e))?;
        let status = reviewed.status.unwrap_or_default();
        let Some(user) = status.user.filter(|_| status.authenticated == Some(true)) else {
            return Ok(Verdict::Unauthenticated);
        };
        let reviews: Api<SubjectAccessReview> = Api::all(self.client.clone());
        let answer = reviews
            .create(&PostParams::default(), &access_review(&user))
            .await
            .map_err(|e| Error::api("create", "SubjectAccessReview", "", "", e))?;
        let allowed = answer.status.is_some_and(|s| s.allowed);
        if !allowed {
            warn!(user = user.username.as_deref().unwrap_or(""), "refused a /metrics scrape");
        }
        Ok(if allowed { Verdict::Allowed } else { Verdict::Forbidden })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(auth: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, HeaderValue::from_str(auth).unwrap());
        h
    }

    #[test]
    fn only_a_non_empty_bearer_token_is_taken() {
        assert_eq!(bearer_token(&headers("Bearer abc.def")), Some("abc.def"));
        assert_eq!(bearer_token(&headers("bearer abc")), Some("abc"));
        assert_eq!(bearer_token(&headers("Basic dXNlcjpwYXNz")), None);
        assert_eq!(bearer_token(&headers("Bearer ")), None);
        assert_eq!(bearer_token(&HeaderMap::new()), None);
    }

    #[test]
    fn the_review_asks_for_get_on_the_metrics_path_as_the_token_user() {
        let user = UserInfo {
            username: Some("system:serviceaccount:mon:prometheus".into()),
            groups: Some(vec!["system:serviceaccounts".into()]),
            uid: Some("u-1".into()),
            ..Default::default()
        };
        let spec = access_review(&user).spec;
        assert_eq!(spec.user, user.username);
        assert_eq!(spec.groups, user.groups);
        assert_eq!(spec.uid, user.uid);
        let attrs = spec.non_resource_attributes.expect("non-resource attributes");
        assert_eq!(attrs.path.as_deref(), Some("/metrics"));
        assert_eq!(attrs.verb.as_deref(), Some("get"));
        assert!(spec.resource_attributes.is_none());
    }

    #[test]
    fn refusals_are_remembered_for_less_time_than_grants() {
        assert!(Verdict::Forbidden.ttl() < Verdict::Allowed.ttl());
        assert_eq!(Verdict::Unauthenticated.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(Verdict::Forbidden.status(), StatusCode::FORBIDDEN);
    }
}
