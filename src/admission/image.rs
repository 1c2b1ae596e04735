//! Pure: the warning for an image that names no fixed version. An image
//! without a tag runs `:latest`, and `:latest` moves: the Deployment's
//! template does not change when the registry's image does, so a rollout
//! cannot tell the versions apart (nothing rolls, nothing can be rolled
//! back to), and any Pod restart may pull a different image than its
//! neighbours run. It is a warning, not a refusal: quick trials and
//! tutorials use `nginx`, and refusing them would push users to a
//! meaningless tag instead; a digest pins the image whatever the tag.

/// Longest image quoted in a warning: the apiserver truncates warnings
/// over 256 characters, and the reason must survive.
const QUOTED_MAX: usize = 64;

/// The warning for `image` (the CRD's pattern admitted it), or None when a
/// tag other than `latest` or a digest pins it.
pub fn warning(image: &str) -> Option<String> {
    if image.contains('@') {
        return None; // a digest pins the image, whatever the tag says
    }
    let last = image.rsplit('/').next().unwrap_or(image);
    let what = match last.rsplit_once(':') {
        Some((_, "latest")) => "uses the tag :latest",
        Some(_) => return None,
        None => "has no tag (so :latest)",
    };
    Some(format!(
        "spec.image {} {what}, which moves: a rollout cannot tell versions apart and a restart may pull \
         another image; pin a version tag or a digest",
        quoted(image)
    ))
}

fn quoted(image: &str) -> String {
    if image.len() <= QUOTED_MAX {
        return format!("{image:?}");
    }
    // The pattern admits ASCII only, so any byte index is a char boundary.
    format!("\"{}...{}\"", &image[..24], &image[image.len() - 36..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_image_without_a_tag_or_with_latest_warns_and_says_why() {
        let w = warning("nginx").unwrap();
        assert_eq!(
            w,
            "spec.image \"nginx\" has no tag (so :latest), which moves: a rollout cannot tell versions apart \
             and a restart may pull another image; pin a version tag or a digest"
        );
        assert!(warning("library/nginx:latest").unwrap().contains("uses the tag :latest"));
        assert!(
            warning("registry.example:5000/team/web").unwrap().contains("has no tag"),
            "a port is no tag"
        );
        assert!(warning("[::1]:5000/web").unwrap().contains("has no tag"));
    }

    #[test]
    fn a_version_tag_or_a_digest_pins_the_image() {
        let digest = format!("nginx@sha256:{}", "a".repeat(64));
        for pinned in ["nginx:1.27", "registry.example:5000/team/web:v2", "web:Latest", &digest] {
            assert_eq!(warning(pinned), None, "{pinned}");
        }
        assert_eq!(warning(&format!("nginx:latest@sha256:{}", "a".repeat(64))), None, "the digest wins");
    }

    #[test]
    fn a_long_image_is_shortened_so_the_warning_stays_under_the_apiservers_limit() {
        let long = format!("registry.example/{}/web", "team".repeat(120));
        let w = warning(&long).unwrap();
        assert!(w.len() < 256, "{} characters: {w}", w.len());
        assert!(w.contains("...") && w.contains("pin a version tag"), "{w}");
    }
}
