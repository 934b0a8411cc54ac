# install.mk: install the nodereg agent and its systemd units.
# Included by the top-level Makefile; also usable alone:
#   make -f systemd/install.mk install DESTDIR=/tmp/root
#
# The installed binary path is NODEREG_AGENT. The unit files in systemd/
# name the default, /usr/sbin/nodereg-agent, so that they verify as shipped;
# install rewrites their ExecStart= to NODEREG_AGENT.

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
AGENT_BIN ?= bin/agent-emulated
NODEREG_BUILD_TARGET := build-emulated
else
AGENT_BIN ?= bin/agent
NODEREG_BUILD_TARGET := build
endif
# yes: also install the upstream names, so existing images, scripts and the
# operator's reset plan keep working: the elemental-register binary and the
# elemental-register-reset unit. A foreign file already there is never
# replaced; set COMPAT_LINKS=no to skip them.
COMPAT_LINKS ?= yes

NODEREG_UNITS := nodereg.service nodereg-update.service nodereg-update.timer nodereg-reset.service nodereg-install.service nodereg-verify.service
NODEREG_DEFAULT_AGENT := /usr/sbin/nodereg-agent

INSTALL ?= install

# link_compat(target, link): create link -> target unless a file that is not
# already a symlink sits there (it belongs to someone else).
define link_compat
	@if [ -e '$(2)' ] && [ ! -L '$(2)' ]; then \
		echo "install: refusing to replace $(2), not ours (COMPAT_LINKS=no skips it)" >&2; exit 1; \
	fi
	ln -sfn '$(1)' '$(2)'
endef

.PHONY: install
# AGENT_BIN is checked, not made: the including Makefile decides how to
# build it (`make build`), and install must never rebuild as root.
install: $(addprefix $(NODEREG_SYSTEMD_DIR)/,$(NODEREG_UNITS)) ## install bin/agent (EMULATED=yes: bin/agent-emulated) and the systemd units (DESTDIR, PREFIX)
	@test -f '$(AGENT_BIN)' || { echo "install: $(AGENT_BIN) not found: build it first (make $(NODEREG_BUILD_TARGET))" >&2; exit 1; }
	$(INSTALL) -d -m 0755 '$(DESTDIR)$(dir $(NODEREG_AGENT))' '$(DESTDIR)$(SYSTEMD_UNITDIR)'
	$(INSTALL) -m 0755 '$(AGENT_BIN)' '$(DESTDIR)$(NODEREG_AGENT)'
	@set -e; for u in $(NODEREG_UNITS); do \
		sed 's|$(NODEREG_DEFAULT_AGENT)|$(NODEREG_AGENT)|g' '$(NODEREG_SYSTEMD_DIR)/'"$$u" > '$(DESTDIR)$(SYSTEMD_UNITDIR)/'"$$u.tmp"; \
		chmod 0644 '$(DESTDIR)$(SYSTEMD_UNITDIR)/'"$$u.tmp"; \
		mv -f '$(DESTDIR)$(SYSTEMD_UNITDIR)/'"$$u.tmp" '$(DESTDIR)$(SYSTEMD_UNITDIR)/'"$$u"; \
		echo "installed $(DESTDIR)$(SYSTEMD_UNITDIR)/$$u"; \
	done
ifeq ($(COMPAT_LINKS),yes)
	$(call link_compat,$(notdir $(NODEREG_AGENT)),$(DESTDIR)$(dir $(NODEREG_AGENT))elemental-register)
	$(call link_compat,nodereg-reset.service,$(DESTDIR)$(SYSTEMD_UNITDIR)/elemental-register-reset.service)
endif
