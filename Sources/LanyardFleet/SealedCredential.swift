import FoundationEssentials
import Age
import LanyardCore
import LanyardSupport

/// A shared slot's credential as etcd holds it: an age file, encrypted to every member's
/// recipient, of the credential bound to its slot name (so ciphertext copied to another slot's
/// key is refused). The boot-clock reading is dropped: it means nothing on another machine.
package enum SealedCredential {
    package static func seal(_ credential: Credential, slot: Slot, to recipients: [String]) throws -> [UInt8] {
        var portable = credential
        portable.lastRefreshBoot = nil
        let document = JSONValue.object(["slot": .string(slot.name), "credential": portable.json])
        let parsed = try recipients.map { r throws -> any Recipient in try X25519Recipient(r) }
        return Array(try Age.encrypt(Data(document.serialized().utf8), to: parsed))
    }

    /// The credential in `sealed`, checked: it must decrypt with `identity`, decode, name `slot`,
    /// and (when `expected` is given) the same account. Throws ``FleetError/refusedCredential``.
    package static func open(_ sealed: [UInt8], slot: Slot, fleet: String, identity: MachineIdentity,
                             expected: AccountInfo? = nil, provider: String? = nil) throws -> Credential {
        func refuse(_ reason: String) -> FleetError { .refusedCredential(slot: slot, fleet: fleet, reason: reason) }
        let plain: Data
        do { plain = try Age.decrypt(Data(sealed), with: [identity.identity]) } catch {
            throw refuse("it does not decrypt with this machine's identity (\(error.userFacingDescription))")
        }
        let credential: Credential
        do {
            let fields = try JSONFields(try JSONValue.parse(plain))
            guard try fields.string("slot") == slot.name else { throw refuse("it was sealed for another slot") }
            credential = try Credential(json: try fields.object("credential"))
        } catch let e as FleetError { throw e } catch {
            throw refuse("it does not decode (\(error.userFacingDescription))")
        }
        if let provider, credential.provider != provider { throw refuse("it is for provider \(credential.provider), not \(provider)") }
        if let expected, !sameAccount(expected, credential.account) { throw refuse("it names another account than the slot's") }
        return credential
    }

    /// Whether `candidate` names the slot's account `known`: its account id when the slot has one,
    /// else its user id, else its email. A slot that knows nothing of its account accepts any.
    package static func sameAccount(_ known: AccountInfo, _ candidate: AccountInfo) -> Bool {
        if let x = known.accountID { return candidate.accountID == x }
        if let x = known.userID { return candidate.userID == x }
        if let x = known.email { return candidate.email?.lowercased() == x.lowercased() }
        return true
    }
}
