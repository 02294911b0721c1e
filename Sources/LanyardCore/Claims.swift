import LanyardSupport

extension AccountInfo {
    /// The claim object in which ChatGPT id tokens carry plan and account data.
    package static let openAIAuthClaim = "https://api.openai.com/auth"

    /// Account data from a ChatGPT id token's claims: `email`, and in the
    /// `https://api.openai.com/auth` object `chatgpt_plan_type`, `chatgpt_user_id` (fallback
    /// `user_id`), `chatgpt_account_id` and `chatgpt_account_is_fedramp`.
    package init(openAIClaims claims: JWTClaims) {
        let auth = claims.payload[AccountInfo.openAIAuthClaim]?.object ?? [:]
        self.init(
            email: claims.email,
            userID: auth["chatgpt_user_id"]?.string ?? auth["user_id"]?.string,
            accountID: auth["chatgpt_account_id"]?.string,
            plan: auth["chatgpt_plan_type"]?.string.map(Plan.init(rawValue:)),
            isFedRAMPAccount: auth["chatgpt_account_is_fedramp"]?.bool ?? false
        )
    }

    /// Account data from a generic OIDC id token: `email`, `sub`, and an optional claim path
    /// (from config) that carries a plan name.
    package init(oidcClaims claims: JWTClaims, planClaim: String?, accountClaim: String? = nil) {
        self.init(
            email: claims.email,
            userID: claims.subject,
            accountID: accountClaim.flatMap { claims.value(atPath: $0)?.string },
            plan: planClaim.flatMap { claims.value(atPath: $0)?.string }.map(Plan.init(rawValue:))
        )
    }
}
