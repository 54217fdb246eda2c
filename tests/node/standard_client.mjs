// A standard client against Entryway: viem + permissionless from npm, written the way their
// documentation shows, with default fee settings (no fee hook: viem asks the chain's node).
// With `bundler` as the last argument it takes its fees from the bundler instead, as
// permissionless's quickstart does (`pimlicoClient.getUserOperationGasPrice()`'s fast tier).
//
//   ENTRYWAY_API_KEY=<key> node standard_client.mjs <service-url> <chain-id> <node-rpc-url> [bundler]
//
// It makes two of Entryway's SmartAccounts (viem's `toSmartAccount` over Entryway's
// AccountFactory) and sends, through `/rpc/{chainId}` as the bundler:
//   1. a self-funded op: the account, funded with the chain's coin by an anvil dev account,
//      pays for its own deployment and call;
//   2. a sponsored op: an account holding nothing, paid for by Entryway's paymaster through
//      viem's `createPaymasterClient` (ERC-7677) on the same `/rpc/{chainId}`.
// Where the chain serves EntryPoint v0.9 (`entryPointV09` in /get-sdk-defaults), it does the same
// with two SimpleAccounts of v0.9 (the npm release candidate's, through its factory): one
// self-funded, one sponsored, the paymaster's signature coming back as v0.9's
// `paymasterSignature`. Entryway's ERC-7677 answer carries it at the end of paymasterData,
// behind v0.9's suffix; viem (2.57) hashes a v0.9 op right only with the signature in its own
// field, and its paymaster client would not fill that field: `v09Paymaster` makes the same
// calls and splits the signature off.
// Where it serves EntryPoint v0.6 (`entryPointV06`), it does the same with two of that release's
// SimpleAccounts (permissionless's `toSimpleSmartAccount`, version "0.6", over the release's
// factory `simpleAccountFactoryV06`): one self-funded, one sponsored through viem's paymaster
// client, the ERC-7677 answer being v0.6's `paymasterAndData`.
// Then a plain EOA, delegated by EIP-7702 to the chain's Simple7702Account (viem's
// `toSimple7702SmartAccount`, its first op carrying the EOA's authorization), sends
//   3. a self-funded op: the EOA, funded by the same dev account, pays for its own op;
//   4. a sponsored op: an EOA holding nothing, paid for by Entryway's paymaster.
// It prints one JSON line with the receipts and exits 0 only if every op was included and
// succeeded; on any failure it prints the error and exits 1.

import { readFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

import { createSmartAccountClient } from "permissionless"
import { toSimpleSmartAccount } from "permissionless/accounts"
import { createPimlicoClient } from "permissionless/clients/pimlico"
import {
    createPublicClient,
    createWalletClient,
    decodeFunctionData,
    encodeFunctionData,
    hashMessage,
    hashTypedData,
    http,
    keccak256,
    parseEther,
    toHex
} from "viem"
import {
    createPaymasterClient,
    entryPoint08Abi,
    entryPoint08Address,
    entryPoint09Abi,
    formatUserOperationRequest,
    getUserOperationHash,
    toSimple7702SmartAccount,
    toSmartAccount
} from "viem/account-abstraction"
import { generatePrivateKey, mnemonicToAccount, privateKeyToAccount } from "viem/accounts"
import { base, baseSepolia, polygon, polygonAmoy } from "viem/chains"

const ARTIFACTS = join(dirname(fileURLToPath(import.meta.url)), "../../src/entryway/contracts/artifacts")
// viem's Amoy names no block time, so its clients would poll every 4 s (the default) where
// they poll every second on the others: give it the 2 s blocks Amoy has, as Polygon's has.
const CHAINS = {
    137: polygon,
    80002: { ...polygonAmoy, blockTime: 2000 },
    8453: base,
    84532: baseSepolia
}
// anvil's well-known development mnemonic; its accounts hold the devnet's coin at genesis.
const ANVIL_MNEMONIC = "test test test test test test test test test test test junk"
// A key that owns nothing: estimation runs the account's real signature recovery with it.
const STUB_SIGNER = privateKeyToAccount(keccak256(toHex("standard client: estimation only")))

function abiOf(name) {
    return JSON.parse(readFileSync(join(ARTIFACTS, `${name}.json`), "utf8")).abi
}

async function sdkDefaults(service, chainId, apiKey) {
    const response = await fetch(`${service}/get-sdk-defaults?chainId=${chainId}`, {
        headers: { Authorization: `Bearer ${apiKey}` }
    })
    if (!response.ok) throw new Error(`GET /get-sdk-defaults: ${response.status} ${await response.text()}`)
    return response.json()
}

/** Entryway's SmartAccount of `owner` and `salt`, as a viem smart account (EntryPoint v0.8). */
async function toEntrywaySmartAccount({ client, owner, salt, factory }) {
    const accountAbi = abiOf("SmartAccount")
    const factoryAbi = abiOf("AccountFactory")
    const address = await client.readContract({
        address: factory,
        abi: factoryAbi,
        functionName: "getAddress",
        args: [owner.address, salt]
    })
    const chainId = client.chain.id
    const messageDomain = { name: "EntrywaySmartAccount", version: "1", chainId, verifyingContract: address }
    const messageTypes = { SmartAccountMessage: [{ name: "hash", type: "bytes32" }] }
    const userOpHash = (userOperation) =>
        getUserOperationHash({
            userOperation: { ...userOperation, sender: address, signature: "0x" },
            entryPointAddress: entryPoint08Address,
            entryPointVersion: "0.8",
            chainId
        })
    return toSmartAccount({
        client,
        entryPoint: { abi: entryPoint08Abi, address: entryPoint08Address, version: "0.8" },
        async getAddress() {
            return address
        },
        async getFactoryArgs() {
            return {
                factory,
                factoryData: encodeFunctionData({
                    abi: factoryAbi,
                    functionName: "createAccount",
                    args: [owner.address, salt]
                })
            }
        },
        async encodeCalls(calls) {
            if (calls.length === 1) {
                const [call] = calls
                return encodeFunctionData({
                    abi: accountAbi,
                    functionName: "execute",
                    args: [call.to, call.value ?? 0n, call.data ?? "0x"]
                })
            }
            return encodeFunctionData({
                abi: accountAbi,
                functionName: "executeBatch",
                args: [calls.map((c) => ({ target: c.to, value: c.value ?? 0n, data: c.data ?? "0x" }))]
            })
        },
        async decodeCalls(callData) {
            const { functionName, args } = decodeFunctionData({ abi: accountAbi, data: callData })
            if (functionName === "execute") return [{ to: args[0], value: args[1], data: args[2] }]
            if (functionName === "executeBatch")
                return args[0].map((c) => ({ to: c.target, value: c.value, data: c.data }))
            throw new Error(`not a call the account makes: ${functionName}`)
        },
        async getNonce() {
            // Key 0, the account's sequential nonce, as Entryway's SDK uses.
            return client.readContract({
                address: entryPoint08Address,
                abi: entryPoint08Abi,
                functionName: "getNonce",
                args: [address, 0n]
            })
        },
        async getStubSignature(userOperation) {
            return STUB_SIGNER.sign({ hash: userOperation ? userOpHash(userOperation) : keccak256("0x") })
        },
        async signMessage({ message }) {
            return owner.signTypedData({
                domain: messageDomain,
                types: messageTypes,
                primaryType: "SmartAccountMessage",
                message: { hash: hashMessage(message) }
            })
        },
        async signTypedData(typedData) {
            return owner.signTypedData({
                domain: messageDomain,
                types: messageTypes,
                primaryType: "SmartAccountMessage",
                message: { hash: hashTypedData(typedData) }
            })
        },
        async signUserOperation(userOperation) {
            // EntryPoint v0.8's userOpHash is an EIP-712 digest; the owner signs it as it is.
            return owner.sign({ hash: userOpHash(userOperation) })
        }
    })
}

/** The v0.9 release candidate's SimpleAccount of `owner` and `salt`, as a viem smart account. */
async function toSimpleAccountV09({ client, owner, salt, factory, entryPoint }) {
    const accountAbi = abiOf("SimpleAccountV09")
    const factoryAbi = abiOf("SimpleAccountFactoryV09")
    const address = await client.readContract({ address: factory, abi: factoryAbi, functionName: "getAddress", args: [owner.address, salt] })
    const chainId = client.chain.id
    const userOpHash = (userOperation) =>
        getUserOperationHash({
            userOperation: { ...userOperation, sender: address, signature: "0x" },
            entryPointAddress: entryPoint,
            entryPointVersion: "0.9",
            chainId
        })
    return toSmartAccount({
        client,
        entryPoint: { abi: entryPoint09Abi, address: entryPoint, version: "0.9" },
        async getAddress() {
            return address
        },
        async getFactoryArgs() {
            const factoryData = encodeFunctionData({ abi: factoryAbi, functionName: "createAccount", args: [owner.address, salt] })
            return { factory, factoryData }
        },
        async encodeCalls(calls) {
            if (calls.length !== 1) throw new Error("this client sends one call per op")
            const [call] = calls
            return encodeFunctionData({ abi: accountAbi, functionName: "execute", args: [call.to, call.value ?? 0n, call.data ?? "0x"] })
        },
        async decodeCalls(callData) {
            const { args } = decodeFunctionData({ abi: accountAbi, data: callData })
            return [{ to: args[0], value: args[1], data: args[2] }]
        },
        async getNonce() {
            return client.readContract({ address: entryPoint, abi: entryPoint09Abi, functionName: "getNonce", args: [address, 0n] })
        },
        async getStubSignature(userOperation) {
            return STUB_SIGNER.sign({ hash: userOperation ? userOpHash(userOperation) : keccak256("0x") })
        },
        async signMessage() {
            throw new Error("SimpleAccount signs UserOperations only here")
        },
        async signTypedData() {
            throw new Error("SimpleAccount signs UserOperations only here")
        },
        async signUserOperation(userOperation) {
            // v0.9's userOpHash is v0.8's EIP-712 digest, a paymasterSignature left out of it.
            return owner.sign({ hash: userOpHash(userOperation) })
        }
    })
}

/** paymasterData that ends in v0.9's paymaster-signature suffix (the signature, its length
 *  in two bytes, then the 8-byte magic), split into the data and the signature, as viem
 *  packs them again. Data without the suffix is returned as it is. */
function splitPaymasterSignature(data) {
    const magic = "22e325a297439656"
    const hex = data.toLowerCase()
    if (!hex.endsWith(magic)) return { paymasterData: data, paymasterSignature: undefined }
    const length = parseInt(hex.slice(-magic.length - 4, -magic.length), 16)
    const end = hex.length - magic.length - 4
    return { paymasterData: hex.slice(0, end - 2 * length), paymasterSignature: "0x" + hex.slice(end - 2 * length, end) }
}

/** ERC-7677 through `paymasterClient`, as viem's paymaster actions do, with v0.9's
 *  `paymasterSignature` kept (viem's own actions leave it out of their result). */
function v09Paymaster(paymasterClient) {
    const call = async (method, { chainId, entryPointAddress, context, ...userOperation }) => {
        const request = formatUserOperationRequest(userOperation)
        const op = { ...request, callGasLimit: request.callGasLimit ?? "0x0", verificationGasLimit: request.verificationGasLimit ?? "0x0", preVerificationGas: request.preVerificationGas ?? "0x0" }
        const answer = await paymasterClient.request({ method, params: [op, entryPointAddress, toHex(chainId), context ?? {}] })
        const { paymasterData, paymasterSignature } = answer.paymasterSignature
            ? answer
            : splitPaymasterSignature(answer.paymasterData)
        return {
            paymaster: answer.paymaster,
            paymasterData,
            paymasterSignature,
            paymasterVerificationGasLimit: BigInt(answer.paymasterVerificationGasLimit),
            paymasterPostOpGasLimit: BigInt(answer.paymasterPostOpGasLimit),
            ...(answer.isFinal !== undefined && { isFinal: answer.isFinal })
        }
    }
    return {
        getPaymasterStubData: (parameters) => call("pm_getPaymasterStubData", parameters),
        getPaymasterData: (parameters) => call("pm_getPaymasterData", parameters)
    }
}

async function send(client, recipient, extra = {}) {
    const hash = await client.sendUserOperation({ calls: [{ to: recipient, value: 0n, data: "0x" }], ...extra })
    const receipt = await client.waitForUserOperationReceipt({ hash, timeout: 120_000 })
    return { userOpHash: hash, success: receipt.success, paymaster: receipt.paymaster, receipt }
}

async function main() {
    const [service, chainIdArg, rpcUrl, feeSource = "node"] = process.argv.slice(2)
    const apiKey = process.env.ENTRYWAY_API_KEY
    if (!service || !chainIdArg || !rpcUrl || !apiKey)
        throw new Error("usage: ENTRYWAY_API_KEY=<key> node standard_client.mjs <service-url> <chain-id> <node-rpc-url> [bundler]")
    if (feeSource !== "node" && feeSource !== "bundler") throw new Error(`fees come from the node or the bundler, not ${feeSource}`)
    const chainId = Number(chainIdArg)
    const chain = CHAINS[chainId]
    if (!chain) throw new Error(`no viem chain for ${chainId}`)
    const defaults = await sdkDefaults(service, chainId, apiKey)
    const endpoint = `${service}/rpc/${chainId}?apikey=${apiKey}`
    const bundlerFees = createPimlicoClient({
        transport: http(endpoint),
        entryPoint: { address: entryPoint08Address, version: "0.8" }
    })
    // Absent, viem asks the node (`eth_maxPriorityFeePerGas`, the base fee) and doubles both.
    const userOperation =
        feeSource === "bundler"
            ? { estimateFeesPerGas: async () => (await bundlerFees.getUserOperationGasPrice()).fast }
            : undefined

    const publicClient = createPublicClient({ chain, transport: http(rpcUrl) })
    const owner = privateKeyToAccount(generatePrivateKey())
    const recipient = privateKeyToAccount(generatePrivateKey()).address

    // 1. Self-funded: the account pays the EntryPoint from its own balance.
    const payer = await toEntrywaySmartAccount({
        client: publicClient,
        owner,
        salt: 0n,
        factory: defaults.accountFactory
    })
    const funder = createWalletClient({
        account: mnemonicToAccount(ANVIL_MNEMONIC, { addressIndex: 9 }),
        chain,
        transport: http(rpcUrl)
    })
    const funding = await funder.sendTransaction({ to: payer.address, value: parseEther("10") })
    await publicClient.waitForTransactionReceipt({ hash: funding })
    const selfFunded = await send(
        createSmartAccountClient({
            account: payer,
            chain,
            client: publicClient,
            bundlerTransport: http(endpoint),
            userOperation
        }),
        recipient
    )

    // 2. Sponsored: an account with no balance, paid for by Entryway's ERC-7677 paymaster.
    const sponsoredAccount = await toEntrywaySmartAccount({
        client: publicClient,
        owner,
        salt: 1n,
        factory: defaults.accountFactory
    })
    const sponsored = await send(
        createSmartAccountClient({
            account: sponsoredAccount,
            chain,
            client: publicClient,
            bundlerTransport: http(endpoint),
            paymaster: createPaymasterClient({ transport: http(endpoint) }),
            userOperation
        }),
        recipient
    )

    let v09
    if (defaults.entryPointV09) {
        const v09Account = (salt) =>
            toSimpleAccountV09({ client: publicClient, owner, salt, factory: defaults.simpleAccountFactoryV09, entryPoint: defaults.entryPointV09 })
        const payerV09 = await v09Account(0n)
        const fundingV09 = await funder.sendTransaction({ to: payerV09.address, value: parseEther("10") })
        await publicClient.waitForTransactionReceipt({ hash: fundingV09 })
        const clientOf = (account, paymaster) =>
            createSmartAccountClient({ account, chain, client: publicClient, bundlerTransport: http(endpoint), paymaster, userOperation })
        const selfFundedV09 = await send(clientOf(payerV09), recipient)
        const paymasterV09 = v09Paymaster(createPaymasterClient({ transport: http(endpoint) }))
        const sponsoredV09 = await send(clientOf(await v09Account(1n), paymasterV09), recipient)
        const brief = (r) => ({ userOpHash: r.userOpHash, success: r.success, paymaster: r.paymaster, entryPoint: r.receipt.entryPoint })
        v09 = { selfFunded: brief(selfFundedV09), sponsored: brief(sponsoredV09) }
        if (!selfFundedV09.success || !sponsoredV09.success) throw new Error("a v0.9 op was included but did not succeed")
    }

    let v06
    if (defaults.entryPointV06) {
        const v06Account = (index) =>
            toSimpleSmartAccount({
                client: publicClient,
                owner,
                index,
                factoryAddress: defaults.simpleAccountFactoryV06,
                entryPoint: { address: defaults.entryPointV06, version: "0.6" }
            })
        const payerV06 = await v06Account(0n)
        const fundingV06 = await funder.sendTransaction({ to: payerV06.address, value: parseEther("10") })
        await publicClient.waitForTransactionReceipt({ hash: fundingV06 })
        const clientOf = (account, paymaster) =>
            createSmartAccountClient({ account, chain, client: publicClient, bundlerTransport: http(endpoint), paymaster, userOperation })
        const selfFundedV06 = await send(clientOf(payerV06), recipient)
        const sponsoredV06 = await send(clientOf(await v06Account(1n), createPaymasterClient({ transport: http(endpoint) })), recipient)
        const brief = (r) => ({ userOpHash: r.userOpHash, success: r.success, paymaster: r.paymaster, entryPoint: r.receipt.entryPoint })
        v06 = { selfFunded: brief(selfFundedV06), sponsored: brief(sponsoredV06) }
        if (!selfFundedV06.success || !sponsoredV06.success) throw new Error("a v0.6 op was included but did not succeed")
    }

    // 3. and 4. EIP-7702: plain EOAs sending from their own address, delegated by their first op.
    const eip7702 = {}
    for (const kind of ["selfFunded", "sponsored"]) {
        const eoa = privateKeyToAccount(generatePrivateKey())
        const account = await toSimple7702SmartAccount({
            client: publicClient,
            owner: eoa,
            implementation: defaults.simple7702Account
        })
        if (kind === "selfFunded") {
            const fund = await funder.sendTransaction({ to: eoa.address, value: parseEther("10") })
            await publicClient.waitForTransactionReceipt({ hash: fund })
        }
        // The EOA signs its delegation for its current account nonce, as viem's guide shows;
        // the first op carries it (`eip7702Auth`).
        const authorization = await eoa.signAuthorization({
            address: defaults.simple7702Account,
            chainId,
            nonce: await publicClient.getTransactionCount({ address: eoa.address })
        })
        const result = await send(
            createSmartAccountClient({
                account,
                chain,
                client: publicClient,
                bundlerTransport: http(endpoint),
                paymaster: kind === "sponsored" ? createPaymasterClient({ transport: http(endpoint) }) : undefined,
                userOperation
            }),
            recipient,
            { authorization }
        )
        const code = await publicClient.getCode({ address: eoa.address })
        eip7702[kind] = {
            userOpHash: result.userOpHash,
            success: result.success,
            paymaster: result.paymaster,
            sender: result.receipt.sender,
            eoa: eoa.address,
            delegatedTo: code && code.startsWith("0xef0100") ? `0x${code.slice(8)}` : null
        }
    }

    const report = {
        v06,
        v09,
        chainId,
        feeSource,
        selfFunded: { userOpHash: selfFunded.userOpHash, success: selfFunded.success, paymaster: selfFunded.paymaster },
        sponsored: { userOpHash: sponsored.userOpHash, success: sponsored.success, paymaster: sponsored.paymaster },
        eip7702,
        deployed: [await publicClient.getCode({ address: payer.address }), await publicClient.getCode({ address: sponsoredAccount.address })].every(
            (code) => code !== undefined && code !== "0x"
        )
    }
    console.log(JSON.stringify(report))
    if (![selfFunded, sponsored, eip7702.selfFunded, eip7702.sponsored].every((op) => op.success)) throw new Error("an op was included but did not succeed")
}

main().catch((error) => {
    console.error(error?.stack ?? String(error))
    process.exit(1)
})
