# Sourced by scripts/setup.sh and scripts/wheel_recipe.sh: installs, with apt,
# the Debian packages of a list that are missing (root, or sudo, needed only
# then). Usage: install_missing_debs WHO PACKAGE...   (WHO prefixes the message)
install_missing_debs() {
  local who=$1 p sudo="" missing=()
  shift
  [ "$(id -u)" = 0 ] || sudo="sudo"
  for p in "$@"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "$who: installing Debian packages: ${missing[*]}"
    $sudo apt-get update -q
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "${missing[@]}"
  fi
}
