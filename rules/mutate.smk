# The proposal step. gen0 is seeded from the shipped solutions; later generations read the previous
# selection. With agent.provider anthropic and ANTHROPIC_API_KEY set, Claude proposes part of each generation
# (oto.agent) and the configured strategy (search.strategy) fills the rest; the same proposals.yaml
# contract either way.
from oto.agent.settings import agent_status, no_key_message

AGENT_ON = agent_status(config)[0]  # provider anthropic and a key (without one the run says so once)
if config["agent"]["provider"] == "anthropic" and not AGENT_ON:
    print(no_key_message(config["search"]["strategy"]), file=sys.stderr)
# resources.llm_api taken by one mutate job: calls are serialised by the profile's llm_api budget
AGENT_LLM_SLOTS = 1 if AGENT_ON else 0
AGENT_RETRIES = 2 if AGENT_ON else 0
if AGENT_ON:

    envvars:
        "ANTHROPIC_API_KEY",


rule mutate:
    input:
        unpack(mutate_inputs),
    output:
        "results/{arch}/{library}/gen{gen}/proposals.yaml",
    log:
        mutate="results/{arch}/logs/{library}/gen{gen}/mutate.log",
        agent="results/{arch}/logs/{library}/gen{gen}/agent.jsonl",
    retries: AGENT_RETRIES
    conda:
        "../workflow/envs/oto.yaml"
    resources:
        llm_api=AGENT_LLM_SLOTS,
    params:
        results=f"results/{ARCH}",
        profile=profile_view("mutate"),
        strategy=lookup(dpath="search/strategy", within=config),
        agent=f"{config['agent']['provider']}:{config['agent']['model'] or 'default'}",
        budget_libraries=budget_libraries,  # the set the budget file must name (gen0: none)
    script:
        "../scripts/mutate.py"
