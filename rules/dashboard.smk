# The dashboard's final state, once every library is finalized. While the run goes on, every select job
# refreshes the same page best-effort (scripts/select_kernels.py), so it is at most one generation behind.
from oto.dashboard.names import CHARTS as DASHBOARD_CHARTS


rule dashboard:
    input:
        finals=expand("results/{{arch}}/{library}/final.yaml", library=LIBRARIES),
        acceptance="results/{arch}/acceptance.html",
        ceilings="results/{arch}/ceilings.yaml",
        deck="results/{arch}/deck.yaml",
    output:
        page="results/{arch}/dashboard/index.html",
        data="results/{arch}/dashboard/data.json",
        charts=[
            report(
                f"results/{{arch}}/dashboard/plots/{name}.svg",
                caption=f"../workflow/report/{name}.rst",
                category="Dashboard",
                labels={"chart": label},
            )
            for name, label in DASHBOARD_CHARTS.items()
        ],
    log:
        "results/{arch}/logs/dashboard.log",
    conda:
        "../workflow/envs/oto.yaml"
    script:
        "../scripts/dashboard.py"
