from servedoctor.cli import main

main()
