// libFuzzer harness for the files Lanyard reads that other hands may have written: config.ini
// (read by GLib's key-file parser, as in Lanyard, then interpreted), `.lanyard` pins, Codex's
// auth.json, the plaintext of an export bundle, the registry, the tray's record of the
// notifications it gave, and the TPM-sealed identity (`identity.tpm`).
// Built by scripts/fuzz.sh against LanyardStore, LanyardIntegrations and LanyardDesktop (and the modules below
// them). Every input is tried as each of them.
// Beyond "does not crash": what parses round-trips through Lanyard's own encoding unchanged (an
// auth.json, the credential made from it, a bundle, a registry whether read streaming or whole),
// a config's numbers are finite and in their documented ranges, and no message about the input
// (error or warning) carries a raw control character to the terminal.

import Foundation
import LanyardCore
import LanyardDesktop
import LanyardIntegrations
import LanyardStore
import LanyardSupport

/// No raw C0/C1 control character (or DEL) except a line break: what reaches a terminal.
func assertPrintable(_ text: String, _ what: String) {
    if let bad = text.unicodeScalars.first(where: {
        ($0.value < 0x20 && $0 != "\n") || (0x7f...0x9f).contains($0.value)
    }) {
        fatalError("\(what) carries control character U+\(String(bad.value, radix: 16)): \(text.debugDescription)")
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzDocuments(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = Data(UnsafeRawBufferPointer(start: data, count: size))

    // config.ini
    do {
        let loaded = try ConfigFile.parse(bytes, path: "config.ini")
        let c = loaded.config
        for (name, value, range) in [
            ("timeout", c.storeTimeout, 0.0...1e9), ("lead", c.refreshLead, 0...1e9),
            ("lead-share", c.refreshLeadShare, 0.01...1), ("max-age", c.refreshMaxAge, 60...1e9),
            ("http timeout", c.httpTimeout, 0...1e9), ("unlock-cache", c.unlockCacheSeconds, 0...1e9),
        ] {
            guard value.isFinite, range.contains(value) else {
                fatalError("config \(name) = \(value) outside \(range)")
            }
        }
        for warning in loaded.warnings { assertPrintable(warning, "a config warning") }
    } catch {
        assertPrintable(error.errorDescription ?? "", "a config error")
    }

    // A `.lanyard` pin: the name it holds is a valid slot or refused with an escaped message.
    let pinned = PinFile.slotName(in: String(decoding: bytes, as: UTF8.self))
    do {
        let slot = try Slot(pinned)
        // [a-z0-9][a-z0-9._-]{0,63}: never a path outside the data folder.
        let bytes = Array(slot.name.utf8)
        func alnum(_ b: UInt8) -> Bool { (b >= 0x61 && b <= 0x7a) || (b >= 0x30 && b <= 0x39) }
        guard (1...64).contains(bytes.count), alnum(bytes[0]),
            bytes.allSatisfy({ alnum($0) || $0 == 0x2e || $0 == 0x5f || $0 == 0x2d })
        else {
            fatalError("slot name \(slot.name.debugDescription) outside [a-z0-9][a-z0-9._-]{0,63}")
        }
    } catch {
        assertPrintable(error.userFacingDescription, "a pin's slot-name error")
    }

    // Codex's auth.json
    do {
        let file = try CodexAuthFile.parse(bytes, path: "auth.json")
        let again = try CodexAuthFile.parse(Data(file.json.serialized(pretty: true).utf8), path: "auth.json")
        guard again == file else { fatalError("auth.json round trip changed it") }
        for token in [file.idToken, file.accessToken, file.refreshToken] where TokenText.problem(token) != nil {
            fatalError("an auth.json token that is not visible ASCII was accepted")
        }
        let credential = file.credential(provider: "openai", expiresAt: nil)
        guard (try? Credential.decode(credential.jsonData(), source: "fuzz")) == credential else {
            fatalError("the credential made from auth.json does not round-trip")
        }
    } catch {
        assertPrintable(error.userFacingDescription, "an auth.json error")
    }

    // An export bundle's plaintext
    do {
        let bundle = try ExportBundle.decode(bytes, source: "bundle")
        guard (try? ExportBundle.decode(bundle.jsonData(pretty: true), source: "bundle")) == bundle else {
            fatalError("bundle round trip changed it")
        }
    } catch {
        assertPrintable(error.userFacingDescription, "a bundle error")
    }

    // The registry, read slot by slot from the bytes and as one document
    let streaming = try? RegistryDocument.decodeStreaming(bytes, source: "registry.json")
    let whole = try? RegistryDocument.decode(bytes, source: "registry.json")
    guard streaming == whole else {
        fatalError(
            "the registry reads differently streaming (\(String(describing: streaming))) "
                + "and whole (\(String(describing: whole)))"
        )
    }
    if let whole,
        (try? RegistryDocument.decodeStreaming(whole.jsonData(pretty: true), source: "registry.json")) != whole
    {
        fatalError("registry round trip changed it")
    }

    // identity.tpm: what decodes is written back byte for byte (comments aside: Lanyard writes its
    // own), decodes to the same value, and a refusal names a line inside the file.
    do {
        let sealed = try SealedIdentityFile.decode(bytes)
        guard (try? SealedIdentityFile.decode(sealed.encoded())) == sealed else {
            fatalError("identity.tpm round trip changed it")
        }
        guard sealed.storageKeyName.count == 34,
            sealed.recoveryRecipients.count <= SealedIdentityFile.maximumRecoveryRecipients
        else {
            fatalError("identity.tpm accepted a storage key name or recovery list out of shape")
        }
    } catch {
        let lines = bytes.reduce(0) { $0 + ($1 == 0x0A ? 1 : 0) }
        if let line = error.line, line < 1 || line > lines + 1 {
            fatalError("identity.tpm error names line \(line) of \(lines)")
        }
        assertPrintable(error.description, "an identity.tpm error")
    }

    // The tray's tray-notified.json: all of it or nothing, and what it keeps round-trips.
    let notified = UsageAlerts.decode(bytes, path: "tray-notified.json")
    if let problem = notified.problem {
        guard notified.notified.isEmpty else { fatalError("a damaged tray-notified.json was partly kept") }
        assertPrintable(problem, "a tray-notified.json problem")
    } else if !notified.notified.isEmpty {
        let alerts = UsageAlerts(percents: [80, 95], notified: notified.notified)
        let again = UsageAlerts.decode(alerts.encoded(), path: "tray-notified.json")
        guard again.problem == nil, again.notified == alerts.notified else {
            fatalError("tray-notified.json round trip changed it")
        }
    }
    return 0
}
