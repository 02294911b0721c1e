import Age
import FoundationEssentials
import LanyardCore
import LanyardSupport

/// A shared slot's value as etcd holds it (`slots/SLOT`), verified: a credential, or the
/// tombstone `fleet unshare` leaves, signed by the member that wrote it, numbered by a
/// generation that only grows.
package struct SharedValue: Equatable, Sendable {
    package enum Content: Equatable, Sendable {
        case credential(Credential)
        /// The slot stopped being shared; `writer` kept the live credential.
        case tombstone
    }
    package var content: Content
    package var generation: Int64
    /// The member that wrote it.
    package var writer: String
    /// The etcd revision it was read at (what fenced writes compare).
    package var modRevision: Int64
    /// The membership entry it was sealed for (0: not known, a value written here).
    package var headSeq: Int64 = 0

    package var credential: Credential? {
        if case .credential(let c) = content { return c }
        return nil
    }
}

/// Seals and opens shared values. A credential is an age file encrypted to every member's
/// recipient; around it, signed by the writer, go the fleet, the slot, the generation, the
/// membership head it was sealed for and the digest of its plaintext. Anyone can encrypt to
/// public recipients, so only the signature makes a value a member's.
package enum SealedCredential {
    static let type = "lanyard-fleet-credential"

    /// The signed value for `slot` at `generation`: `credential` sealed to the membership's
    /// recipients, or a tombstone when it is nil.
    package static func seal(
        _ credential: Credential?,
        slot: Slot,
        fleet: String,
        generation: Int64,
        membership: Membership,
        writer: MachineIdentity,
        machine: String
    ) throws -> [UInt8] {
        var body: [String: JSONValue] = [
            "type": .string(type), "fleet": .string(fleet), "slot": .string(slot.name),
            "generation": .string(String(generation)), "head_seq": .string(String(membership.seq)),
            "head": .string(membership.head), "writer": .string(machine),
        ]
        if var portable = credential {
            portable.lastRefreshBoot = nil  // measured on this machine's boot clock
            let document = JSONValue.object([
                "fleet": .string(fleet), "slot": .string(slot.name), "generation": .string(String(generation)),
                "credential": portable.json,
            ])
            let plain = Array(document.serialized().utf8)
            let recipients = try membership.recipients.map { r throws -> any Recipient in try X25519Recipient(r) }
            body["sealed"] = .string(try Age.encrypt(Data(plain), to: recipients).base64EncodedString())
            body["digest"] = .string(hexString(SHA256.digest(plain)))
        } else {
            body["tombstone"] = .bool(true)
        }
        return SignedDocument.sign(.object(body), with: writer.signing)
    }

    /// The value in `kv`, checked: signed by a member of `membership` for this fleet and slot,
    /// sealed for a membership this machine verified, decrypting with `identity` to the plaintext
    /// signed, for `provider`, and naming the slot's account `expected` (declared and in the
    /// tokens' own claims). Anything else throws ``FleetError/refusedCredential``.
    package static func open(
        _ kv: EtcdKeyValue,
        slot: Slot,
        fleet: String,
        membership: Membership,
        identity: MachineIdentity,
        expected: AccountInfo? = nil,
        provider: String? = nil
    ) throws(FleetError) -> SharedValue {
        func refuse(_ reason: String) -> FleetError { .refusedCredential(slot: slot, fleet: fleet, reason: reason) }
        let doc: SignedDocument
        do { doc = try SignedDocument(kv.value, key: kv.key, kind: type) } catch {
            throw refuse(error.userFacingDescription)
        }
        let f = doc.fields
        let writer: String
        let generation: Int64
        let headSeq: Int64
        let head: String
        do {
            writer = try f.machineName("writer")
            generation = try f.counter("generation")
            headSeq = try f.counter("head_seq")
            head = try f.string("head")
            guard try f.string("fleet") == fleet else { throw refuse("it was written for another fleet") }
            guard try f.string("slot") == slot.name else { throw refuse("it was sealed for another slot") }
        } catch let error as FleetError { throw error } catch {
            throw refuse("it does not decode (\(error.userFacingDescription))")
        }
        guard let member = membership.member(writer), doc.isSigned(by: member.signingKey) else {
            throw refuse("it is not signed by a member (it names \(writer) as its writer)")
        }
        try membership.check(head: headSeq, digest: head, signer: writer, source: kv.key)
        guard generation > 0 else { throw refuse("its generation is 0") }
        if (try? f.optionalBool("tombstone")) == true {
            return SharedValue(
                content: .tombstone,
                generation: generation,
                writer: writer,
                modRevision: kv.modRevision,
                headSeq: headSeq
            )
        }
        let plain: Data
        do {
            guard let sealed = Data(base64Encoded: try f.string("sealed")) else {
                throw refuse("its sealed credential is not base64")
            }
            plain = try Age.decrypt(sealed, with: [identity.identity])
        } catch let error as FleetError { throw error } catch {
            throw refuse("it does not decrypt with this machine's identity (\(error.userFacingDescription))")
        }
        guard (try? f.string("digest")) == hexString(SHA256.digest(Array(plain))) else {
            throw refuse("its plaintext is not the one signed")
        }
        let credential: Credential
        do {
            let inner = try JSONFields(try JSONValue.parse(plain))
            guard try inner.string("slot") == slot.name, try inner.string("fleet") == fleet,
                try inner.counter("generation") == generation
            else {
                throw refuse("its plaintext names another slot, fleet or generation")
            }
            credential = try Credential(json: try inner.object("credential"))
        } catch let e as FleetError { throw e } catch {
            throw refuse("it does not decode (\(error.userFacingDescription))")
        }
        if let provider, credential.provider != provider {
            throw refuse("it is for provider \(TerminalText.escaped(credential.provider)), not \(provider)")
        }
        if let claimed = claimedAccount(credential), contradicts(claimed, credential.account) {
            throw refuse("the account it declares is not the one its tokens name")
        }
        if let expected {
            guard sameAccount(expected, credential.account) else {
                throw refuse("it names another account than the slot's")
            }
            if let claimed = claimedAccount(credential), contradicts(claimed, expected) {
                throw refuse("its tokens name another account than the slot's")
            }
        }
        return SharedValue(
            content: .credential(credential),
            generation: generation,
            writer: writer,
            modRevision: kv.modRevision,
            headSeq: headSeq
        )
    }

    /// Whether `candidate` names the slot's account `known`: its account id when the slot has one,
    /// else its user id, else its email. A slot that knows nothing of its account accepts any.
    package static func sameAccount(_ known: AccountInfo, _ candidate: AccountInfo) -> Bool {
        if let x = known.accountID { return candidate.accountID == x }
        if let x = known.userID { return candidate.userID == x }
        if let x = known.email { return candidate.email?.lowercased() == x.lowercased() }
        return true
    }

    /// The account the credential's id token names in its own claims (nil: no readable id token).
    static func claimedAccount(_ credential: Credential) -> AccountInfo? {
        guard let token = credential.tokens.idToken, let claims = try? JWTClaims(token: token) else { return nil }
        if credential.provider == "openai" { return AccountInfo(openAIClaims: claims) }
        return AccountInfo(email: claims.email, userID: claims.subject)
    }

    /// Whether two descriptions of an account disagree on a field both have.
    static func contradicts(_ a: AccountInfo, _ b: AccountInfo) -> Bool {
        if let x = a.accountID, let y = b.accountID, x != y { return true }
        if let x = a.email, let y = b.email, x.lowercased() != y.lowercased() { return true }
        if a.accountID == nil || b.accountID == nil, let x = a.userID, let y = b.userID, x != y { return true }
        return false
    }
}

/// A refresh about to present a shared slot's refresh token (`intents/SLOT`), written by the
/// lock holder in a fenced transaction before it calls the provider and deleted with the write of
/// its successor: a machine that finds another machine's intent for the token it holds never
/// spends that token (the provider may have rotated it already; the holder has its successor).
package struct RefreshIntent: Equatable, Sendable {
    static let type = "lanyard-fleet-intent"
    package var machine: String
    /// The fingerprint (``TokenFingerprint``) of the refresh token being presented.
    package var token: String
    /// The generation whose refresh token it is.
    package var generation: Int64
    package var at: Date?

    package static func make(
        fleet: String,
        slot: Slot,
        machine: String,
        token: String,
        generation: Int64,
        at: Date,
        membership: Membership,
        identity: MachineIdentity
    ) -> [UInt8] {
        SignedDocument.sign(
            .object([
                "type": .string(type), "fleet": .string(fleet), "slot": .string(slot.name), "machine": .string(machine),
                "token": .string(token), "generation": .string(String(generation)), "at": .date(at),
                "head_seq": .string(String(membership.seq)), "head": .string(membership.head),
            ]),
            with: identity.signing
        )
    }

    /// The intent in `kv`, nil when it does not verify (a value no member signed is no intent:
    /// the lock and the fenced writes still keep one refresh at a time). One a member signed for
    /// a membership this machine cannot verify, or for another entry than the one verified here,
    /// throws (``Membership/check(head:digest:signer:source:)``): that is evidence, not noise.
    package static func open(
        _ kv: EtcdKeyValue,
        slot: Slot,
        fleet: String,
        membership: Membership
    ) throws(FleetError) -> RefreshIntent? {
        guard let doc = try? SignedDocument(kv.value, key: kv.key, kind: type),
            let machine = try? doc.fields.machineName("machine"), let member = membership.member(machine),
            doc.isSigned(by: member.signingKey),
            (try? doc.fields.string("fleet")) == fleet, (try? doc.fields.string("slot")) == slot.name,
            let token = try? doc.fields.string("token"), let generation = try? doc.fields.counter("generation")
        else { return nil }
        if let headSeq = try? doc.fields.counter("head_seq"), let head = try? doc.fields.string("head") {
            try membership.check(head: headSeq, digest: head, signer: machine, source: kv.key)
        }
        return RefreshIntent(
            machine: machine,
            token: token,
            generation: generation,
            at: (try? doc.fields.optionalDate("at")) ?? nil
        )
    }
}
