# shellcheck shell=bash
# shellcheck disable=SC2034  # GB300_FOUND, GB300_SENTINEL, ... are read by the step scripts
# gb300 node bootstrap library, sourced by run-step and every step script.
#
# Every filesystem path is prefixed with ${GB300_ROOT:-} so the test sandbox can run the steps against
# a scratch directory. State lives under /var/lib/gb300 (status, step records, fabric.json,
# bootstrap.done); the step in progress is in /run/gb300/current-step. Nothing is written to /tmp.
# A step's stdout/stderr go to the journal under gb300-<step> (run-step pipes them to logger).

GB300_STATE_DIR="${GB300_ROOT:-}/var/lib/gb300"
GB300_RUN_DIR="${GB300_ROOT:-}/run/gb300"
GB300_STATUS_FILE="${GB300_ROOT:-}/var/lib/gb300/status"
GB300_SENTINEL="${GB300_ROOT:-}/var/lib/gb300/bootstrap.done"
GB300_STEP="${GB300_STEP:-unknown}"
GB300_CHANGED=0
# Here-documents and tools that honour TMPDIR write under /run/gb300/tmp, never /tmp.
export TMPDIR="${GB300_ROOT:-}/run/gb300/tmp"
mkdir -p "${TMPDIR}"

for _gb300_env in cluster.env node.env versions.env; do
  if [ -r "${GB300_ROOT:-}/etc/gb300/${_gb300_env}" ]; then
    # shellcheck disable=SC1090  # rendered per pool, placed by write_files
    . "${GB300_ROOT:-}/etc/gb300/${_gb300_env}"
  fi
done
unset _gb300_env

log() { printf '%s\n' "$*"; }
warn() { printf 'WARNING: %s\n' "$*"; }

# fail REASON: stop this step; run-step copies REASON into the status file and stops the bootstrap.
fail() {
  mkdir -p "${GB300_RUN_DIR}"
  printf '%s\n' "$*" >"${GB300_RUN_DIR}/reason"
  printf 'FAILED: %s\n' "$*" >&2
  exit 1
}

# write_if_changed PATH [MODE] < CONTENT: replace PATH only when CONTENT differs, so a re-run leaves
# files (and their mtimes) untouched. Sets GB300_CHANGED to 1 when it wrote, 0 otherwise; to read
# it, feed CONTENT with `< <(...)`, not a pipe (a pipe runs this in a subshell).
write_if_changed() {
  local path=$1 mode=${2:-0644}
  mkdir -p "$(dirname "$path")"
  cat >"${path}.gb300-new"
  if [ -f "$path" ] && cmp -s "${path}.gb300-new" "$path"; then
    rm -f "${path}.gb300-new"
    GB300_CHANGED=0
  else
    chmod "$mode" "${path}.gb300-new"
    mv -f "${path}.gb300-new" "$path"
    GB300_CHANGED=1
  fi
}

# record LINE...: the step's completion record, /var/lib/gb300/steps/<step>.done.
record() {
  printf '%s\n' "$@" | write_if_changed "${GB300_STATE_DIR}/steps/${GB300_STEP}.done"
}

# sw COMPONENT FIELD: a pinned-software value from /etc/gb300/versions.env.
sw() {
  local var
  var="GB300_SW_$(printf '%s' "$1" | tr 'a-z.-' 'A-Z__')_$2"
  printf '%s' "${!var:-}"
}

# installed_version COMPONENT: the version found on this node ("present" for file checks), or nothing.
installed_version() {
  local detect
  detect=$(sw "$1" DETECT)
  case "$detect" in
    nvidia-smi)
      # nvidia-smi prints its failures on stdout ("NVIDIA-SMI has failed ..."): keep a version only.
      if command -v nvidia-smi >/dev/null 2>&1; then
        { nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null || true; } |
          awk 'NR == 1 && /^[0-9]+(\.[0-9]+)+$/ { print }'
      fi
      ;;
    dpkg:*)
      dpkg-query -W -f='${Status} ${Version}\n' "${detect#dpkg:}" 2>/dev/null |
        awk '$3 == "installed" { print $4 }' || true
      ;;
    file:*)
      if [ -e "${GB300_ROOT:-}${detect#file:}" ]; then printf 'present\n'; fi
      ;;
    *) fail "$1: unknown detect method '${detect}' in versions.env" ;;
  esac
}

# version_matches WANT GOT: GOT (epoch stripped) is WANT or WANT followed by - . + or ~.
version_matches() {
  local want=$1 got=${2#*:}
  case "$got" in
    "$want" | "$want"-* | "$want".* | "$want"+* | "$want"~*) return 0 ;;
    *) return 1 ;;
  esac
}

# fetch_verified URL SHA256 DEST: download once, checked against its pinned sha256.
fetch_verified() {
  local url=$1 sha=$2 dest=$3
  if [ -z "$sha" ] || [ "$sha" = "-" ]; then
    fail "refusing to download ${url}: infra/gb300/data/checksums.yaml pins no sha256 for it. Run 'gb300 software lock' on a machine with internet access and redeploy, or use the Ubuntu-HPC GB image, which carries the component."
  fi
  if [ -s "$dest" ] && printf '%s  %s\n' "$sha" "$dest" | sha256sum -c --status; then
    return 0
  fi
  mkdir -p "$(dirname "$dest")"
  curl -fsSL --proto =https --proto-redir =https --retry 5 --retry-delay 5 -o "${dest}.part" "$url" || fail "download failed: ${url}"
  if ! printf '%s  %s\n' "$sha" "${dest}.part" | sha256sum -c --status; then
    rm -f "${dest}.part"
    fail "checksum mismatch for ${url}: expected sha256 ${sha}"
  fi
  mv -f "${dest}.part" "$dest"
}

# key_fingerprints FILE: the fingerprint of every primary key in the OpenPGP key FILE, one per line.
key_fingerprints() {
  local home
  home=$(mktemp -d)
  # --show-keys reads the file without importing it; the throwaway home keeps the node's keyrings untouched.
  GNUPGHOME="$home" gpg --batch --no-tty --with-colons --show-keys "$1" 2>/dev/null |
    awk -F: '$1 == "pub" { primary = 1; next } $1 == "fpr" && primary { print $10; primary = 0 }'
  rm -rf "$home"
}

# fetch_signing_key URL "FPR..." DEST: place the repository key at DEST only when every primary key in it
# is one of the pinned fingerprints (a rotated or substituted key is refused, never trusted on first use).
fetch_signing_key() {
  local url=$1 pinned=$2 dest=$3 found fpr
  if [ -z "$pinned" ]; then
    fail "refusing to trust the signing key at ${url}: infra/gb300/data/checksums.yaml pins no fingerprint for it. Run 'gb300 software lock' on a machine with internet access and redeploy, or use the Ubuntu-HPC GB image, which carries the stack."
  fi
  if [ -s "$dest" ]; then
    found=$(key_fingerprints "$dest")
    if [ -n "$found" ] && keys_pinned "$found" "$pinned"; then
      return 0
    fi
  fi
  mkdir -p "$(dirname "$dest")"
  curl -fsSL --proto =https --proto-redir =https --retry 5 --retry-delay 5 -o "${dest}.part" "$url" || fail "download failed: ${url}"
  found=$(key_fingerprints "${dest}.part")
  if [ -z "$found" ]; then
    rm -f "${dest}.part"
    fail "the file at ${url} holds no OpenPGP public key"
  fi
  for fpr in $found; do
    if ! keys_pinned "$fpr" "$pinned"; then
      rm -f "${dest}.part"
      fail "signing key ${fpr} at ${url} is not pinned (pinned: ${pinned}); if the vendor rotated its key, review and re-run 'gb300 software lock'"
    fi
  done
  chmod 0644 "${dest}.part"
  mv -f "${dest}.part" "$dest"
}

# keys_pinned "FOUND..." "PINNED...": every fingerprint in FOUND is in PINNED.
keys_pinned() {
  local fpr
  for fpr in $1; do
    case " $2 " in
      *" $fpr "*) ;;
      *) return 1 ;;
    esac
  done
}

# listed_repo URL SUITE: the apt source file (not gb300's) already listing URL with SUITE (.list or .sources).
listed_repo() {
  local url=${1%/} suite=$2 file apt="${GB300_ROOT:-}/etc/apt"
  for file in "$apt/sources.list" "$apt"/sources.list.d/*.list "$apt"/sources.list.d/*.sources; do
    [ -r "$file" ] || continue
    case "$(basename "$file")" in gb300-*) continue ;; esac
    if awk -v url="$url" -v suite="$suite" '
      function norm(u) { sub(/\/+$/, "", u); return u }
      /^[[:space:]]*deb[[:space:]]/ {
        line = $0; sub(/#.*/, "", line); sub(/\[[^]]*\]/, "", line)
        n = split(line, f, " ")
        if (n >= 3 && norm(f[2]) == url && f[3] == suite) found = 1
        next
      }
      /^[[:space:]]*$/ { if (match_uri && match_suite) found = 1; match_uri = match_suite = 0; next }
      /^URIs:/ { for (i = 2; i <= NF; i++) if (norm($i) == url) match_uri = 1 }
      /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == suite) match_suite = 1 }
      END { if (match_uri && match_suite) found = 1; exit !found }' "$file"; then
      printf '%s\n' "${file#"${GB300_ROOT:-}"}"
      return 0
    fi
  done
}

# ensure_repo NAME: the vendor apt repository NAME is configured, and apt's lists are current. An entry the
# image has for the same URL and suite is reused: a second signed-by for it breaks every apt-get update.
ensure_repo() {
  local prefix line key_url key_fprs url suite list existing
  prefix="GB300_REPO_$(printf '%s' "$1" | tr 'a-z.-' 'A-Z__')"
  line="${prefix}_LINE" key_url="${prefix}_KEY_URL" key_fprs="${prefix}_KEY_FINGERPRINTS"
  url="${prefix}_URL" suite="${prefix}_SUITE"
  list="${GB300_ROOT:-}/etc/apt/sources.list.d/gb300-$1.list"
  existing=$(listed_repo "${!url:-}" "${!suite:-}")
  GB300_CHANGED=0
  if [ -n "$existing" ]; then
    log "repository $1: the image lists ${!url:-} ${!suite:-} in ${existing}; using that entry and its keyring"
  else
    fetch_signing_key "${!key_url:-}" "${!key_fprs:-}" "${GB300_ROOT:-}/etc/apt/keyrings/gb300-$1.asc"
    write_if_changed "$list" < <(printf '%s\n' "${!line:-}")
  fi
  # One apt-get update per boot unless a repository was just added (the marker lives in /run).
  if [ "$GB300_CHANGED" = 1 ] || [ ! -e "${GB300_RUN_DIR}/apt-updated" ]; then
    DEBIAN_FRONTEND=noninteractive apt-get update -q || fail "apt-get update failed after adding repository $1"
    mkdir -p "${GB300_RUN_DIR}"
    : >"${GB300_RUN_DIR}/apt-updated"
  fi
}

# install_blocker COMPONENT: why COMPONENT cannot be installed at boot (`install: none`, or no version or
# sha256 pinned for its downloads); prints nothing when it can be.
install_blocker() {
  local name=$1 i
  local -a urls=() shas=()
  case "$(sw "$name" INSTALL)" in
    none) printf 'it cannot be installed at boot: %s' "$(sw "$name" REASON)" ;;
    deb | deb-repo | source)
      read -r -a urls <<<"$(sw "$name" FILES)"
      read -r -a shas <<<"$(sw "$name" SHA256S)"
      if [ "${#urls[@]}" -eq 0 ]; then
        printf 'infra/gb300/data/versions.yaml pins no version for it, so there is nothing to download'
      fi
      for i in "${!urls[@]}"; do
        if [ "${shas[$i]:--}" = - ]; then
          printf 'infra/gb300/data/checksums.yaml pins no sha256 for %s (run gb300 software lock)' "${urls[$i]}"
          return 0
        fi
      done
      ;;
  esac
}

# build_from_source COMPONENT: download the pinned source (sha256 checked), unpack the first file under
# /var/lib/gb300/build/<component>-<version>/src, install the build packages from Ubuntu's archive and
# run the recipe /usr/local/lib/gb300/build/<recipe>.sh there with the component's build_env exported.
# The recipe installs to the path `detect:` checks; the build tree is removed once it has.
build_from_source() {
  local name=$1 version recipe blocked dir url i key
  local -a urls=() shas=() deps=() keys=()
  version=$(sw "$name" VERSION)
  recipe="${GB300_ROOT:-}/usr/local/lib/gb300/build/$(sw "$name" RECIPE).sh"
  [ -x "$recipe" ] || fail "$name: build recipe ${recipe#"${GB300_ROOT:-}"} is missing or not executable"
  blocked=$(install_blocker "$name")
  if [ -z "$(sw "$name" FILES)" ]; then
    fail "$name: not found on this image, and it cannot be built at boot: ${blocked}. Pin its version and sha256, or use the Ubuntu-HPC GB image, which carries it."
  fi
  read -r -a urls <<<"$(sw "$name" FILES)"
  read -r -a shas <<<"$(sw "$name" SHA256S)"
  for i in "${!urls[@]}"; do
    url=${urls[$i]}
    fetch_verified "$url" "${shas[$i]:-}" "${GB300_STATE_DIR}/downloads/${name}/$(basename "$url")"
  done
  dir="${GB300_STATE_DIR}/build/${name}-${version}"
  rm -rf "$dir"
  mkdir -p "$dir/src"
  tar -xzf "${GB300_STATE_DIR}/downloads/${name}/$(basename "${urls[0]}")" -C "$dir/src" --strip-components=1 --no-same-owner ||
    fail "$name: cannot unpack $(basename "${urls[0]}")"
  read -r -a deps <<<"$(sw "$name" BUILD_PACKAGES)"
  if [ "${#deps[@]}" -gt 0 ]; then
    if [ ! -e "${GB300_RUN_DIR}/apt-updated" ]; then
      DEBIAN_FRONTEND=noninteractive apt-get update -q || fail "$name: apt-get update failed"
      : >"${GB300_RUN_DIR}/apt-updated"
    fi
    log "$name: installing build packages ${deps[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${deps[@]}" ||
      fail "$name: apt-get install ${deps[*]} failed (see journalctl -t gb300-${GB300_STEP})"
  fi
  read -r -a keys <<<"$(sw "$name" BUILD_ENV)"
  log "$name: building ${version} with ${recipe#"${GB300_ROOT:-}"}"
  rm -f "${GB300_RUN_DIR}/reason"
  if ! (
    cd "$dir/src" || exit 1
    for key in "${keys[@]}"; do export "${key}=$(sw "$name" "BUILD_${key}")"; done
    "$recipe"
  ); then
    [ -s "${GB300_RUN_DIR}/reason" ] && exit 1
    fail "$name: the build failed (see journalctl -t gb300-${GB300_STEP}; the tree is kept in ${dir#"${GB300_ROOT:-}"})"
  fi
  rm -rf "$dir"
}

# Download a component's FILES, each checked against its pinned sha256, into the state directory;
# their local paths are left in GB300_FETCHED.
fetch_component_files() {
  local name=$1 url i
  local -a urls shas
  read -r -a urls <<<"$(sw "$name" FILES)"
  read -r -a shas <<<"$(sw "$name" SHA256S)"
  GB300_FETCHED=()
  for i in "${!urls[@]}"; do
    url=${urls[$i]}
    fetch_verified "$url" "${shas[$i]:-}" "${GB300_STATE_DIR}/downloads/$(basename "$url")"
    GB300_FETCHED+=("${GB300_STATE_DIR}/downloads/$(basename "$url")")
  done
}

# install_component COMPONENT: install from the vendor's arm64/sbsa repository or pinned files.
install_component() {
  local name=$1 kind pattern pkg
  local -a pkgs=() args=()
  kind=$(sw "$name" INSTALL)
  read -r -a pkgs <<<"$(sw "$name" PACKAGES)"
  case "$kind" in
    apt | archive)
      # `archive`: Ubuntu's own archive, already configured on every image; `apt`: a vendor repository.
      if [ "$kind" = apt ]; then ensure_repo "$(sw "$name" REPO)"; fi
      pattern=$(sw "$name" APT_VERSION)
      for pkg in "${pkgs[@]}"; do
        if [ -n "$pattern" ]; then args+=("${pkg}=${pattern}"); else args+=("$pkg"); fi
      done
      log "$name: installing ${args[*]}"
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${args[@]}" ||
        fail "$name: apt-get install ${args[*]} failed (see journalctl -t gb300-${GB300_STEP})"
      ;;
    deb)
      fetch_component_files "$name"
      args=("${GB300_FETCHED[@]}")
      log "$name: installing ${args[*]}"
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${args[@]}" ||
        fail "$name: installing the downloaded packages failed"
      ;;
    deb-repo)
      # The downloaded package sets up a local apt repository (DOCA's doca-host); packages come from it.
      fetch_component_files "$name"
      [ "${#GB300_FETCHED[@]}" -gt 0 ] || fail "$name: versions.yaml lists no repository package to download"
      args=("${GB300_FETCHED[@]}")
      log "$name: installing the repository package ${args[*]}"
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${args[@]}" ||
        fail "$name: installing ${args[*]} failed"
      DEBIAN_FRONTEND=noninteractive apt-get update -q || fail "$name: apt-get update failed after adding its local repository"
      pattern=$(sw "$name" APT_VERSION)
      args=()
      for pkg in "${pkgs[@]}"; do args+=("${pkg}${pattern:+=$pattern}"); done
      log "$name: installing ${args[*]}"
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${args[@]}" ||
        fail "$name: apt-get install ${args[*]} failed (see journalctl -t gb300-${GB300_STEP})"
      ;;
    source) build_from_source "$name" ;;
    none)
      fail "$name: not found on this image, and it cannot be installed at boot: $(sw "$name" REASON)"
      ;;
    *) fail "$name: unknown install kind '${kind}' in versions.env" ;;
  esac
}

# verify_or_install COMPONENT: skip when the pinned version is found; install when absent; fail on a
# mismatch (a drifted driver, IMEX or OFED breaks NCCL after a "successful" deploy). An optional component
# that is absent and cannot be installed at boot is a warning with its reason, not a failure.
verify_or_install() {
  local name=$1 want got blocked
  want=$(sw "$name" VERSION)
  got=$(installed_version "$name")
  if [ -z "$got" ]; then
    if [ "$(sw "$name" DEFERRED)" = 1 ]; then
      log "$name: not present yet; deferred: $(sw "$name" REASON)"
      GB300_FOUND="$name deferred"
      return 0
    fi
    if [ "$(sw "$name" OPTIONAL)" = 1 ]; then
      blocked=$(install_blocker "$name")
      if [ -n "$blocked" ]; then
        warn "$name absent (optional): $blocked"
        GB300_FOUND="$name absent (optional): $blocked"
        return 0
      fi
    fi
    install_component "$name"
    got=$(installed_version "$name")
    [ -n "$got" ] || fail "$name: not found after installing it"
  fi
  if [ "$got" = present ]; then
    log "$name: present; its version${want:+ (pinned ${want})} cannot be read on the node, so it is not compared"
    GB300_FOUND="$name present${want:+, pin ${want} not readable}"
  elif [ -z "$want" ]; then
    log "$name: found (${got}); versions.yaml pins no version for it, so it is recorded, not compared"
    GB300_FOUND="$name ${got} unpinned"
  elif version_matches "$want" "$got"; then
    log "$name: ${got} matches the pinned ${want}"
    GB300_FOUND="$name ${got} pinned ${want}"
  else
    fail "$name: found version ${got} but ${want} is pinned. Use an image that carries ${want}, or accept this one with gb300:software.${name}: \"${got}\" in the stack and reimage the pool."
  fi
}

# ensure_service UNIT: enabled and running.
ensure_service() {
  local unit=$1
  if ! systemctl is-enabled --quiet "$unit"; then
    systemctl enable "$unit" || fail "cannot enable ${unit}"
  fi
  if ! systemctl is-active --quiet "$unit"; then
    systemctl start "$unit" || fail "${unit} does not start (see journalctl -u ${unit})"
  fi
  systemctl is-active --quiet "$unit" || fail "${unit} is not running (see journalctl -u ${unit})"
}

# ensure_module MODULE: loaded now and at every boot.
ensure_module() {
  local mod=$1
  if [ ! -d "${GB300_ROOT:-}/sys/module/${mod}" ]; then
    modprobe "$mod" || fail "cannot load kernel module ${mod}"
  fi
  mkdir -p "${GB300_ROOT:-}/etc/modules-load.d"
  grep -qx "$mod" "${GB300_ROOT:-}/etc/modules-load.d/gb300.conf" 2>/dev/null ||
    printf '%s\n' "$mod" >>"${GB300_ROOT:-}/etc/modules-load.d/gb300.conf"
}
