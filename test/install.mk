# test/install.mk: the docs' examples checked against the shipped files;
# included by the top Makefile.
#
#   make check-docs     hack/check-docs.sh: the examples marked as shipped
#                       files match them, the NRI series leaves pkg/api and
#                       pkg/stub alone (part of make lint)

.PHONY: check-docs

check-docs:
	bash hack/check-docs.sh
