#!/usr/bin/env bash
# Screenshot every page of the built book in headless Chromium, as a reader sees it at 1400 px.
#
#   tools/screenshot_pages.sh [HTML_DIR] [OUT_DIR]      # defaults: _build/html  _build/screenshots
#
# One PNG per page (notebooks/<chapter>.png, book/<page>.png, index.png), tall enough for long
# chapters (Chromium cuts at the window height: raise HEIGHT for longer pages). Needs Debian's
# `chromium`; runs offline (the book's MathJax is local).
set -euo pipefail
html=${1:-_build/html}
out=${2:-_build/screenshots}
height=${HEIGHT:-12000}
browser=$(command -v chromium || command -v chromium-browser || true)
[ -n "$browser" ] || { echo "screenshot_pages: chromium not found (apt install chromium)" >&2; exit 2; }
[ -f "$html/index.html" ] || { echo "screenshot_pages: no book in $html (run make book first)" >&2; exit 2; }
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
find "$html" -name '*.html' -not -path '*/_static/*' -not -name 'genindex.html' -not -name 'search.html' |
  sort | while read -r page; do
    rel=${page#"$html"/}
    png="$out/${rel%.html}.png"
    mkdir -p "$(dirname "$png")"
    "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$profile" \
      --window-size=1400,"$height" --virtual-time-budget=8000 --screenshot="$png" "file://$(realpath "$page")" \
      > /dev/null 2>&1 || echo "screenshot_pages: failed on $rel" >&2
    echo "$png"
  done
