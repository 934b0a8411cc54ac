# install.mk: install the nodereg agent and its systemd units.
# Included by the top-level Makefile; also usable alone:
#   make -f systemd/install.mk install DESTDIR=/tmp/root
#
# The installed binary path is NODEREG_AGENT. The unit files in systemd/
# name the default, /usr/sbin/nodereg-agent, so that they verify as shipped;
# install rewrites their ExecStart= to NODEREG_AGENT. systemd/install.sh
# does the work and holds the list of units; it also runs alone from a
# checkout (docs/rancher.md's Dockerfile), with the defaults below.

NODEREG_SYSTEMD_DIR := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))

DESTDIR ?=
PREFIX ?= /usr
SBINDIR ?= $(PREFIX)/sbin
SYSTEMD_UNITDIR ?= $(PREFIX)/lib/systemd/system
NODEREG_AGENT ?= $(SBINDIR)/nodereg-agent
# yes: install the emulated-TPM build (make build-emulated) instead, for
# labs and VMs without a TPM (--emulate-tpm).
EMULATED ?= no
# The built agent this target installs.
ifeq ($(EMULATED),yes)
AGENT_BIN ?= bin/nodereg-agent-emulated
NODEREG_BUILD_TARGET := build-emulated
else
AGENT_BIN ?= bin/nodereg-agent
NODEREG_BUILD_TARGET := build
endif
# yes: also install the upstream names, so existing images, scripts and the
# operator's reset plan keep working: the elemental-register binary and the
# elemental-register-reset unit. A foreign file already there is never
# replaced; set COMPAT_LINKS=no to skip them.
COMPAT_LINKS ?= yes


# no: refuse to install over upstream's elemental-register (an Elemental
# image) with nothing written; replace: take over: upstream's binary kept
# as elemental-register.upstream, the compatibility links in its place,
# upstream's units masked in ADMIN_UNITDIR and nodereg's enabled
# (systemctl --root; docs/rancher.md, "Installing into an Elemental image").
ELEMENTAL_REGISTER ?= no
# yes: enable nodereg's units (those with an [Install] section) after the
# install, with systemctl --root=DESTDIR; replace implies it.
SYSTEMD_ENABLE ?= no
ADMIN_UNITDIR ?= /etc/systemd/system
MANDIR ?= $(PREFIX)/share/man
DOCDIR ?= $(PREFIX)/share/doc/nodereg
# The man pages (make man) and the docs, from the repository's root.
NODEREG_ROOT := $(patsubst %/,%,$(dir $(NODEREG_SYSTEMD_DIR)))
MAN_SRC ?= $(if $(BIN),$(BIN)/man)
DOC_FILES ?= $(patsubst $(NODEREG_ROOT)/%,%,$(wildcard $(NODEREG_ROOT)/README.md $(NODEREG_ROOT)/LICENSE $(NODEREG_ROOT)/docs/*.md))

NODEREG_INSTALL_ENV = DESTDIR='$(DESTDIR)' NODEREG_AGENT='$(NODEREG_AGENT)' SYSTEMD_UNITDIR='$(SYSTEMD_UNITDIR)' \
	AGENT_BIN='$(AGENT_BIN)' UNIT_SRC='$(NODEREG_SYSTEMD_DIR)' \
	COMPAT_LINKS='$(COMPAT_LINKS)' ELEMENTAL_REGISTER='$(ELEMENTAL_REGISTER)' \
	SYSTEMD_ENABLE='$(SYSTEMD_ENABLE)' ADMIN_UNITDIR='$(ADMIN_UNITDIR)' NODEREG_BUILD_TARGET='$(NODEREG_BUILD_TARGET)' \
	MAN_SRC='$(MAN_SRC)' MANDIR='$(MANDIR)' DOC_FILES='$(DOC_FILES)' DOC_ROOT='$(NODEREG_ROOT)' DOCDIR='$(DOCDIR)'

.PHONY: install install-list
# AGENT_BIN is checked, not made: the including Makefile decides how to
# build it (`make build`), and install must never rebuild as root. Every
# target is checked before any is written (systemd/install.sh).
install: ## install bin/nodereg-agent (EMULATED=yes: bin/nodereg-agent-emulated), the units, man pages and docs (DESTDIR, PREFIX, ELEMENTAL_REGISTER=replace, SYSTEMD_ENABLE=yes)
	@$(NODEREG_INSTALL_ENV) sh '$(NODEREG_SYSTEMD_DIR)/install.sh'

install-list: ## print the files make install writes (below DESTDIR)
	@$(NODEREG_INSTALL_ENV) sh '$(NODEREG_SYSTEMD_DIR)/install.sh' --list
