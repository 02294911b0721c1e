# Lanyard — make demo | make check | make bench | make fuzz | make install
SWIFT ?= swift
PREFIX ?= /usr/local
RELEASE_FLAGS = -c release --static-swift-stdlib
export LANYARD_SOURCE_ROOT := $(CURDIR)

.PHONY: all deps build release check test demo bench fuzz install clean

all: build

deps:
	@scripts/deps.sh

build: deps
	@$(SWIFT) build --quiet

release: deps
	@$(SWIFT) build $(RELEASE_FLAGS) --quiet

# Every test, inside a private D-Bus session with an unlocked gnome-keyring (fails if it cannot start).
check: deps
	@$(SWIFT) build --build-tests --quiet
	@scripts/check.sh

test: check

demo: build
	@scripts/demo.sh

bench: release
	@scripts/bench.sh

fuzz: deps
	@if [ -x scripts/fuzz.sh ]; then scripts/fuzz.sh $${FUZZ_SECONDS:-600}; else echo "no fuzz harnesses yet"; fi

install: release
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 0755 .build/release/lanyard $(DESTDIR)$(PREFIX)/bin/lanyard
	install -d $(DESTDIR)$(PREFIX)/lib/lanyard
	install -m 0755 .build/release/lanyard-net $(DESTDIR)$(PREFIX)/lib/lanyard/lanyard-net
	install -d $(DESTDIR)$(PREFIX)/lib/systemd/user
	for unit in Packaging/systemd/*.service Packaging/systemd/*.timer; do \
		sed 's|/usr/local/bin/lanyard|$(PREFIX)/bin/lanyard|g' $$unit > $(DESTDIR)$(PREFIX)/lib/systemd/user/$$(basename $$unit); \
		chmod 0644 $(DESTDIR)$(PREFIX)/lib/systemd/user/$$(basename $$unit); \
	done

clean:
	@$(SWIFT) package clean
