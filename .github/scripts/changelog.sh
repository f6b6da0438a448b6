#!/usr/bin/env bash
# A CHANGELOG.md section for one release tag, from the commits since the previous v* tag.
#
#   .github/scripts/changelog.sh v0.2.0                    print the section (the release body)
#   .github/scripts/changelog.sh v0.2.0 --insert FILE      also insert it into FILE, under
#                                                          "## [Unreleased]", above older releases
#
# The previous tag is the nearest v* tag reachable from the tag's parent, so a patch release
# on a branch lists only that branch's commits. The date is the tagged commit's, so the same
# tag always gives the same section. Merge commits are left out: their branches' commits are
# listed themselves.
set -euo pipefail

tag="${1:?usage: changelog.sh TAG [--insert FILE]}"
git rev-parse -q --verify "refs/tags/$tag" >/dev/null || { echo "changelog: no tag $tag" >&2; exit 1; }

prev="$(git describe --tags --abbrev=0 --match 'v*' "$tag^" 2>/dev/null || true)"
range="$tag"
[ -n "$prev" ] && range="$prev..$tag"

section="$(
  printf '## [%s] - %s\n\n' "${tag#v}" "$(git log -1 --format=%cs "$tag")"
  if [ -n "$prev" ]; then
    printf 'Changes since %s:\n\n' "$prev"
  else
    printf 'First release.\n\n'
  fi
  git log --no-merges --format='- %s (%h)' "$range"
)"
printf '%s\n' "$section"

if [ "${2:-}" = "--insert" ]; then
  file="${3:?--insert needs a file}"
  grep -q '^## \[Unreleased\]' "$file" || { echo "changelog: $file has no '## [Unreleased]' section" >&2; exit 1; }
  if grep -q "^## \[${tag#v}\]" "$file"; then
    echo "changelog: $file already has a section for ${tag#v}" >&2
    exit 0
  fi
  # Before the first release section after Unreleased, or at the end when there is none yet.
  SECTION="$section" awk '
    /^## \[/ && !/^## \[Unreleased\]/ && !done { print ENVIRON["SECTION"]; print ""; done = 1 }
    { print }
    END { if (!done) { print ""; print ENVIRON["SECTION"] } }
  ' "$file" >"$file.tmp"
  mv "$file.tmp" "$file"
fi
