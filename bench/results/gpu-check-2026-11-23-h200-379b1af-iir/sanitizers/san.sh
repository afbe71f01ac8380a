# How sanitizers/ was made (on the lent H200, in a clean export of 379b1af, after its gpu-check):
#   PROBE_TARGETS=test_iir PROBE_SAN=1 PROBE_NCU= PROBE_RUNS="none:1" OUT=$OUT bash scripts/gpu-iir-probe.sh
# i.e. compute-sanitizer --tool {memcheck,racecheck,synccheck,initcheck} --error-exitcode 9
#   ./test_iir cuda with NDF_TEST_CASES=8; the last 20 lines of each log are kept here.
