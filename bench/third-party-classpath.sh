#!/usr/bin/env bash
# Sourced by bench/all.sh and bench/run.sh (from the repository root): sets $third_party_cp to the
# third-party jars Maven resolves for bench. Resolved in the reactor (-am, packaged): alone, bench's
# own dev.tickmark dependencies are looked up in the local repository, where nothing was installed,
# and the look-up fails before any is excluded. Kept in bench/target/classpath-ext.txt until
# bench/pom.xml changes.
cp_file=bench/target/classpath-ext.txt
if [ ! -s "$cp_file" ] || [ bench/pom.xml -nt "$cp_file" ]; then
  mvn -B -q -o -pl bench -am -DskipTests package dependency:build-classpath -DexcludeGroupIds=dev.tickmark \
    -Dmdep.outputFile=target/classpath-ext.txt \
    || mvn -B -q -pl bench -am -DskipTests package dependency:build-classpath -DexcludeGroupIds=dev.tickmark \
      -Dmdep.outputFile=target/classpath-ext.txt
fi
third_party_cp=$(cat "$cp_file")
