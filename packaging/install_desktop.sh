#!/usr/bin/env bash
# Install Easel's desktop entry and icons for the current user (freedesktop layout).
#   packaging/install_desktop.sh [EXEC]   EXEC: the command that starts Easel
#                                          (default: this checkout's .venv/bin/easel)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
exec_cmd="${1:-$root/.venv/bin/easel}"
data="${XDG_DATA_HOME:-$HOME/.local/share}"

mkdir -p "$data/applications" "$data/icons/hicolor/scalable/apps"
sed "s|^Exec=.*|Exec=$exec_cmd|" "$root/packaging/easel.desktop" > "$data/applications/easel.desktop"
cp "$root/resources/icons/easel.svg" "$data/icons/hicolor/scalable/apps/easel.svg"
for png in "$root"/resources/icons/easel-*.png; do
    size="$(basename "$png" .png)"; size="${size#easel-}"
    mkdir -p "$data/icons/hicolor/${size}x${size}/apps"
    cp "$png" "$data/icons/hicolor/${size}x${size}/apps/easel.png"
done
command -v update-desktop-database >/dev/null && update-desktop-database -q "$data/applications" || true
echo "installed: $data/applications/easel.desktop (Exec=$exec_cmd)"
