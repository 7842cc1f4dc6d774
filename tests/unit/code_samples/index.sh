#!/bin/sh
# Index a folder, then search it.
set -eu

# Print how to call this script.
usage() {
    echo "usage: $0 FOLDER QUERY" >&2
    exit 2
}

function index_folder {
    ragtui ingest "$1"
}

[ $# -eq 2 ] || usage
index_folder "$1"
ragtui search "$2"
