# The final dashboard, once every library is finalized. While the run goes on, every select job
# refreshes the live page results/<arch>/live/ best-effort (scripts/select_kernels.py): no job writes here.
from oto.reporting.charts import CHARTS as DASHBOARD_CHARTS


rule dashboard:
    input:
        finals=expand("results/{{arch}}/{library}/final.yaml", library=PLAN.delivered),
        acceptance="results/{arch}/acceptance.html",
        ceilings="results/{arch}/ceilings.yaml",
        deck="results/{arch}/deck.yaml",
        verify=expand("results/{{arch}}/{library}/verify.yaml", library=LIBRARIES),
        compare="results/{arch}/compare/compare.yaml",
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
    params:
        results=f"results/{ARCH}",
    script:
        "../scripts/dashboard.py"
