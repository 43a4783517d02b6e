# bash completion for vramtap(1)
_vramtap()
{
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
    if [ "$COMP_CWORD" -eq 1 ]; then
        COMPREPLY=($(compgen -W "run report diff import view export lib --help --version" -- "$cur"))
        return
    fi
    case ${COMP_WORDS[1]} in
    run)
        case $prev in
        --mode) COMPREPLY=($(compgen -W "tensor native" -- "$cur")); return ;;
        --out) COMPREPLY=($(compgen -d -- "$cur")); return ;;
        esac
        local i
        for ((i = 2; i < COMP_CWORD; i++)); do
            # after the options: the command and its own arguments
            if [ "${COMP_WORDS[i]}" = -- ] || [[ ${COMP_WORDS[i]} != -* && ${COMP_WORDS[i-1]} != --mode && ${COMP_WORDS[i-1]} != --out ]]; then
                COMPREPLY=($(compgen -c -f -- "$cur"))
                return
            fi
        done
        COMPREPLY=($(compgen -W "--mode --out --help --" -- "$cur"))
        [ ${#COMPREPLY[@]} -eq 0 ] && COMPREPLY=($(compgen -c -- "$cur"))
        ;;
    report | diff | view | export)
        if [[ $cur == -* ]]; then
            COMPREPLY=($(compgen -W "--json --folded --top --device --all-frames --help" -- "$cur"))
        else
            COMPREPLY=($(compgen -f -X '!*.json' -- "$cur") $(compgen -d -- "$cur"))
        fi
        ;;
    import)
        COMPREPLY=($(compgen -W "-o --help" -- "$cur") $(compgen -f -- "$cur"))
        ;;
    esac
}
complete -o filenames -F _vramtap vramtap
