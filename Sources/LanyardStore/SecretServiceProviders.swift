/// The programs that implement the Secret Service, told apart by the process that owns the bus
/// name, and what about each matters to Lanyard (shown by `lanyard doctor`).
package enum SecretServiceProvider {
    /// The provider's display name and its notes, for the owner's process name (`/proc/PID/comm`).
    package static func identify(processName: String) -> (name: String, notes: [String]) {
        switch processName {
        case let p where p.hasPrefix("gnome-keyring"):
            return (
                "gnome-keyring",
                [
                    "items go to the collection of the default alias (normally `login`), "
                        + "unlocked with your login password"
                ]
            )
        case let p where p.lowercased().hasPrefix("keepassxc"):
            return (
                "KeePassXC",
                [
                    "items live in the database group exposed in Settings › Secret Service Integration (a database "
                        + "with no exposed group offers no collection)",
                    "a locked database is a locked collection: "
                        + "unlock it in KeePassXC (Lanyard cannot unlock it, exit 5)",
                    "turn off \"Confirm when passwords are retrieved by clients\" for commands without a screen: an "
                        + "unanswered dialog makes each command wait for [store] timeout",
                    "before 2.7.6, another program replacing an item Lanyard "
                        + "made (secret-tool store) can hang KeePassXC "
                        + "(upstream bug 9255); Lanyard itself updates items in place",
                    "2.7.4 can crash when items change in quick succession "
                        + "while \"Automatically save after every change\" "
                        + "is on (seen with 100 slots written in a row); "
                        + "a token written just before a crash is lost with it",
                ]
            )
        case let p where p.hasPrefix("kwalletd") || p.hasPrefix("ksecretd"):
            return (
                "KWallet",
                [
                    "items go to the wallet KWallet serves as the default collection (normally kdewallet; "
                        + "\"Default Wallet\" in kwalletrc); each wallet is a collection, "
                        + "and there is no session collection",
                    "a closed wallet is a locked collection: "
                        + "open it in KWalletManager (Lanyard cannot unlock it, exit 5)",
                    "KWallet keeps Lanyard's content type (application/json), "
                        + "so `secret-tool lookup` refuses the secret as "
                        + "not textual: `secret-tool search --all` shows it",
                    "only the secret is encrypted: labels (with the email) and attributes are kept in clear beside the "
                        + "wallet (~/.local/share/kwalletd/WALLET_attributes.json)",
                ]
            )
        default:
            return (processName, ["a Secret Service provider Lanyard is not tested against"])
        }
    }
}
