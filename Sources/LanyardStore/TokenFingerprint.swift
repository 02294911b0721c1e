import Age
import LanyardCore
import LanyardSupport

/// A refresh token's fingerprint: the first 16 bytes of its SHA-256, in hex. Enough to recognise
/// a token again; reveals nothing of it.
package enum TokenFingerprint {
    package static func of(_ token: String) -> String {
        hexString(SHA256.digest(Array(token.utf8)).prefix(16))
    }
}

extension Credential {
    /// Whether `refreshToken` is one this credential rotated away from.
    package func hasSpent(refreshToken: String) -> Bool {
        !spentRefreshTokens.isEmpty && spentRefreshTokens.contains(TokenFingerprint.of(refreshToken))
    }

    /// Takes over `previous`'s spent list, adding `previous`'s refresh token when this credential
    /// replaced it (a refresh, or tokens Codex rotated).
    package mutating func recordRotation(from previous: Credential) {
        spentRefreshTokens = previous.spentRefreshTokens
        guard let spent = previous.tokens.refreshToken, !spent.isEmpty, spent != tokens.refreshToken else { return }
        let fingerprint = TokenFingerprint.of(spent)
        spentRefreshTokens = Array(
            ([fingerprint] + spentRefreshTokens.filter { $0 != fingerprint }).prefix(Credential.spentLimit)
        )
    }
}
