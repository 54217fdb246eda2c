#!/usr/bin/env bash
# Sets up the public ERC-4337 bundler conformance suite (eth-infinitism/bundler-spec-tests)
# outside this repository, one checkout per EntryPoint release, doing the steps that
# docs/conformance.md lists one by one. It fetches while it runs; the suite then runs offline.
#
# Usage: tools/conformance-setup.sh RELEASE DIR [--python PYTHON]
#                                   [--suite-url URL] [--spec-url URL] [--aa-url URL]
#   RELEASE  v0.8 (the suite's master branch), v0.7 or v0.6 (its releases/ branches)
#   DIR      a directory that does not exist yet
#   --python the interpreter for the suite's virtualenv (default python3.11; python3.10 for v0.6)
#   --*-url  where to clone the suite, eth-infinitism/bundler-spec and
#            eth-infinitism/account-abstraction from (default: GitHub)
# Needs git, node with npm, and python3.11 (it reads pdm.lock). Prints the pytest command at the end.
set -euo pipefail

usage() { sed -n '6,13p' "$0" >&2; exit 2; }
[[ $# -ge 2 ]] || usage
release=$1 dir=$2
shift 2
python=
suite_url=https://github.com/eth-infinitism/bundler-spec-tests.git
spec_url=https://github.com/eth-infinitism/bundler-spec.git
aa_url=https://github.com/eth-infinitism/account-abstraction.git
while [[ $# -gt 0 ]]; do
  case $1 in
    --python) python=${2:?--python needs a value} ;;
    --suite-url) suite_url=$2 ;;
    --spec-url) spec_url=$2 ;;
    --aa-url) aa_url=$2 ;;
    *) usage ;;
  esac
  shift 2
done
case $release in
  v0.8) branch=master entry_point=0x4337084D9E255Ff0702461CF8895CE9E3b5Ff108 ;;
  v0.7) branch=releases/v0.7 entry_point=0x0000000071727De22E5E9d8BAf0edAc6f37da032 ;;
  v0.6) branch=releases/v0.6 entry_point=0x5FF137D4b0FDCD49DcA30c7CF57E578a026d2789 ;;
  *) usage ;;
esac
[[ -n $python ]] || { [[ $release == v0.6 ]] && python=python3.10 || python=python3.11; }
[[ -e $dir ]] && { echo "$dir already exists" >&2; exit 1; }
standin=$(cd "$(dirname "$0")" && pwd)/solc-standin.mjs

step() { printf '\n== %s\n' "$*"; }

step "1. the suite, $branch"
git clone --branch "$branch" "$suite_url" "$dir"
dir=$(cd "$dir" && pwd)
cd "$dir"

step "2. spec/ at the commit the suite pins"
git -c protocol.file.allow=always -c "submodule.spec.url=$spec_url" submodule update --init spec

step "3. the EntryPoint sources under @account-abstraction/"
case $release in
  v0.8)
    # The pinned commit is not public: npm's 0.8.0 release holds the same sources.
    mkdir -p @account-abstraction/contracts
    tarball=$(npm pack --silent @account-abstraction/contracts@0.8.0)
    tar -xzf "$tarball" --strip-components=1 --exclude=package/artifacts -C @account-abstraction/contracts
    rm "$tarball"
    ;;
  v0.7)
    # The pinned commit is not public: the repository's v0.7.0 tag stands in.
    rmdir @account-abstraction
    git -c advice.detachedHead=false clone --depth 1 --branch v0.7.0 "$aa_url" @account-abstraction
    ;;
  v0.6)
    git -c protocol.file.allow=always -c "submodule.account-abstraction.url=$aa_url" \
      submodule update --init @account-abstraction
    # tests/conftest.py reads the EntryPoint's ABI from a Hardhat build output the submodule
    # lacks: the npm 0.6.0 release's artifact (this repository's node_modules) serves.
    artifact=@account-abstraction/artifacts/contracts/core/EntryPoint.sol
    mkdir -p "$artifact"
    cp "$(dirname "$standin")/../node_modules/@account-abstraction/contracts-v06/artifacts/EntryPoint.json" \
      "$artifact/EntryPoint.json"
    ;;
esac

solc_version=$(sed -n 's/.*install_solc(version="\([0-9.]*\)").*/\1/p' tests/conftest.py)
step "4. npm packages: solc $solc_version, and what spec/scripts/build.js imports"
npm install --prefix . --no-save --no-audit --no-fund --loglevel=error \
  "solc@$solc_version" js-yaml@4.1.0 json-schema-merge-allof@0.8.1 @open-rpc/schema-utils-js@1.15.0

step "5. spec/openrpc.json"
(cd spec && node scripts/build.js >/dev/null && ls -l openrpc.json)

step "6. the solc stand-in where py-solc-x looks (SOLCX_BINARY_PATH)"
node "$standin" --solcjs node_modules/solc --write-launcher solcx

step "7. the locked Python packages, pywin32 (Windows only) left out"
# pdm.lock read with Python 3.11's tomllib (the suite's own interpreter may be older).
python3.11 -c 'import tomllib; pkgs = tomllib.load(open("pdm.lock", "rb"))["package"]; print("\n".join(sorted({p["name"] + "==" + p["version"] for p in pkgs if p["name"] != "pywin32"})))' \
  > requirements.txt
"$python" -m venv .venv
.venv/bin/pip install --quiet --prefer-binary --no-deps -r requirements.txt
.venv/bin/pip check

step "ready"
cat <<EOF
Start anvil and the bundler as docs/conformance.md says, then, in $dir:
  SOLCX_BINARY_PATH=$dir/solcx .venv/bin/pytest --url http://127.0.0.1:13000/rpc \\
      --entry-point $entry_point --ethereum-node http://127.0.0.1:18545 tests/single
EOF
