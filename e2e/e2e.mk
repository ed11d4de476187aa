# End-to-end test on real ibverbs: Soft-RoCE (rdma_rxe) in qemu TCG guests.
# Included from the top-level Makefile. Needs the apt packages listed in e2e/README.md.
.PHONY: e2e e2e-clean e2e-selftest

# Builds the library, the verbs program and the guest image, boots one guest and a
# wired pair, checks the JSON files; the last line is "N passed, M failed".
e2e:
	bash e2e/run.sh

# The e2e checker's models against canned real guest runs (e2e/testdata/tools) and
# doctored copies of them, and the trio's and the traffic class scenario's verdict judgements
# on right and wrong analyser answers: runs in `make test`, no guest needed.
e2e-selftest:
	python3 e2e/check_tools.py selftest
	python3 e2e/check_trio.py selftest
	python3 e2e/check_tclass.py selftest

e2e-clean:
	rm -rf e2e/build
